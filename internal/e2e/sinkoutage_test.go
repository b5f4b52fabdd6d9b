package e2e

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/pgtest"
)

// These tests take the S3 sink away for longer than a request's retries
// last (issue 6): a long blackhole, an outage that never ends, and a sink
// that is merely slow. They run pg-cdc through faultProxy (s3faults_test.go)
// with short timeouts set in the config, so that a minute of outage spans
// many attempts and sessions.

// TestS3LongBlackhole blackholes the S3 endpoint for 60 s while a workload
// runs and a 12 MiB transaction (a multipart delta) commits: every request
// is taken and never answered. With storage.request_timeout_sec: 2 and one
// SDK retry, each request is abandoned after about 2 s and each flush
// fails within a few seconds; the session restarts from the manifest with
// backoff, again and again, and streams on once the blackhole ends.
// Nothing hangs longer than the bound (the proxy times every request it
// held), nothing is lost (the merged state equals the source), the slot is
// never confirmed past the manifest, and no manifest names a missing file.
func TestS3LongBlackhole(t *testing.T) {
	waitBound(t)
	if testing.Short() {
		t.Skip("long: a 60 s blackhole")
	}
	const (
		timeout   = 2 * time.Second
		blackhole = 60 * time.Second
	)
	var proxy *faultProxy
	// max_attempts is raised because every session in the blackhole
	// fails, about one every 10 s: the default 10 would leave little
	// margin on a loaded machine.
	e := newEnv(t, envOptions{sink: "s3",
		extraYAML: "gc:\n  grace_period: 1s\nhistory:\n  retention: 1s\naws:\n  max_retries: 1\nretry:\n  initial_backoff: 500ms\n  max_backoff: 4s\n  max_attempts: 30\n",
		s3Via: func(endpoint string) string {
			proxy = newFaultProxy(t, endpoint)
			return proxy.URL
		}})
	e.procEnv = append(e.procEnv, "PGCDC_STORAGE_REQUEST_TIMEOUT_SEC="+strconv.Itoa(int(timeout/time.Second)))
	seed(t, e, 50, 100)
	e.mustRun("init")
	s := e.startSampler()
	d := e.start()
	w := runWorkloadFor(e.url, 5, blackhole+20*time.Second)
	e.waitProgress(e.manifest().EndLSN, 60*time.Second)

	from := e.manifest().EndLSN
	began := time.Now()
	proxy.set("blackhole")
	// About 12 MiB of Parquet in one transaction: its delta is a multipart
	// upload, attempted (and abandoned) in every session of the blackhole.
	e.exec(`INSERT INTO orders SELECT g, 1, 0, 'big', '{}', now(),
	          (SELECT string_agg(md5(random()::text || i || g), '') FROM generate_series(1, 250) i)
	        FROM generate_series(100000, 102999) g`)
	time.Sleep(blackhole - time.Since(began))
	proxy.set("")
	ended := time.Now()
	e.waitProgress(from, 90*time.Second)
	t.Logf("the stream moved again %v after the blackhole ended", time.Since(ended).Round(100*time.Millisecond))
	assertManifestFilesExist(t, e)

	w.wait(t)
	touchAll(e)
	e.waitCaughtUp(120 * time.Second)
	d.stop()
	s.check()

	// Every request the blackhole held was given up by pg-cdc within the
	// bound (plus scheduling slack on a loaded machine), or was still
	// within it when the blackhole ended.
	var abandoned, released int
	var longest time.Duration
	kinds := map[string]int{}
	for _, h := range proxy.held() {
		longest = max(longest, h.d)
		if h.abandoned {
			abandoned++
			kinds[h.kind]++
		} else {
			released++
		}
		if h.d > timeout+2*time.Second {
			t.Errorf("a request was held %v (abandoned %t); request_timeout_sec is %v", h.d, h.abandoned, timeout)
		}
	}
	t.Logf("blackhole: %d requests abandoned by pg-cdc %v, %d released when it ended, longest hold %v",
		abandoned, kinds, released, longest.Round(10*time.Millisecond))
	if abandoned < 10 {
		t.Errorf("only %d requests were abandoned in a %v blackhole", abandoned, blackhole)
	}
	// Among them uploads of deltas. (Whether the large delta's multipart
	// upload gets as far as the store depends on which table's upload
	// fails first and cancels the others; parts whose body stalls are
	// TestUploadTimeouts' subject.)
	if kinds[http.MethodPut] == 0 {
		t.Errorf("abandoned requests by kind %v: want delta uploads (PUT) among them", kinds)
	}
	// The blackhole outlasted the SDK's retries many times over: the
	// session failed and was restarted, and never ran out of retries.
	out := d.out.String()
	failures := sessionFailures(out, began, ended)
	t.Logf("%d sessions failed during the blackhole, at %v", len(failures), failures)
	if len(failures) < 3 {
		t.Errorf("%d sessions failed during a %v blackhole, want several:\n%s", len(failures), blackhole, lines(withoutDebug(out), 30))
	}
	// No session hung: failures followed each other within a bound made
	// of the request bound (two attempts of a flush's upload, two of the
	// manifest re-read), the SDK's backoff (at most 2 s before its one
	// retry, jittered), the longest retry wait and a session's start.
	bound := 4*timeout + 2*2*time.Second + 4*time.Second + 5*time.Second
	for i := 1; i < len(failures); i++ {
		if gap := failures[i] - failures[i-1]; gap > bound {
			t.Errorf("%v between session failures %d and %d; want at most %v", gap, i, i+1, bound)
		}
	}
	if strings.Contains(out, "retries exhausted") {
		t.Errorf("pg-cdc ran out of retries in the blackhole:\n%s", lines(withoutDebug(out), 30))
	}
	assertSinkEqualsSource(t, e, "public.customers", "public.orders", "public.items")
	assertManifestFilesExist(t, e)
}

// TestSinkDownExitsRetriesExhausted: the S3 endpoint answers every request
// with 503 and never recovers. pg-cdc retries the session
// retry.max_attempts times with backoff, then exits 3 ("retries
// exhausted") within a bounded time, without having confirmed anything
// past the manifest. A supervisor's restart once the sink is back loses
// nothing.
func TestSinkDownExitsRetriesExhausted(t *testing.T) {
	waitBound(t)
	const attempts = 4
	var proxy *faultProxy
	e := newEnv(t, envOptions{sink: "s3",
		extraYAML: fmt.Sprintf("aws:\n  max_retries: 1\nretry:\n  initial_backoff: 200ms\n  max_backoff: 1s\n  max_attempts: %d\n", attempts),
		s3Via: func(endpoint string) string {
			proxy = newFaultProxy(t, endpoint)
			return proxy.URL
		}})
	seed(t, e, 50, 100)
	e.mustRun("init")
	s := e.startSampler()
	d := e.start()
	w := runWorkloadFor(e.url, 6, 20*time.Second)
	e.waitProgress(e.manifest().EndLSN, 60*time.Second)

	proxy.set("down")
	down := time.Now()
	before := e.manifest()
	code := d.wait(3 * time.Minute)
	took := time.Since(down)
	out := d.out.String()
	t.Logf("pg-cdc exited %d %v after the sink went down", code, took.Round(100*time.Millisecond))
	if code != 3 || !strings.Contains(out, "retries exhausted") {
		t.Fatalf("pg-cdc on a sink that stays down: exit %d, want 3 (retries exhausted):\n%s", code, lines(withoutDebug(out), 30))
	}
	// Bounded retries: exactly retry.max_attempts, each after a failed
	// session, all of them sink failures.
	retries := regexp.MustCompile(`msg="replication session failed; retrying" err="[^\n]*sink request failed[^\n]* attempt=(\d+)`).FindAllStringSubmatch(out, -1)
	if len(retries) != attempts || retries[len(retries)-1][1] != strconv.Itoa(attempts) {
		t.Errorf("%d sink-failure retries logged (last %v), want %d:\n%s", len(retries), retries, attempts, lines(withoutDebug(out), 30))
	}
	// Bounded time: five sessions of a few seconds each (a flush's upload
	// and the manifest re-read, two attempts each, with the SDK's backoff)
	// plus the backoff waits (0.2+0.4+0.8+1 s).
	if took > 60*time.Second {
		t.Errorf("pg-cdc took %v to give up; want well under a minute with these settings", took)
	}
	// Nothing was committed while the sink was down, and the slot was never
	// confirmed past the manifest (the sampler, below).
	if after := e.manifest(); after.EndLSN != before.EndLSN || after.Epoch != before.Epoch {
		t.Errorf("the manifest moved from epoch %d (%s) to %d (%s) while the sink answered only 503", before.Epoch, before.EndLSN, after.Epoch, after.EndLSN)
	}
	confirmed := slotConfirmed(t, e)
	t.Logf("slot confirmed at %s, manifest at %s", confirmed, before.EndLSN)
	if confirmed > before.EndLSN {
		t.Errorf("slot confirmed at %s, past the manifest's %s", confirmed, before.EndLSN)
	}

	// The supervisor restarts pg-cdc once the sink is back.
	proxy.set("")
	w.wait(t)
	touchAll(e)
	d = e.start()
	e.waitCaughtUp(120 * time.Second)
	d.stop()
	s.check()
	assertSinkEqualsSource(t, e, "public.customers", "public.orders", "public.items")
	assertManifestFilesExist(t, e)
}

// TestSlowSinkBoundedMemory streams 400,000 rows (about 110 MB of WAL)
// through an S3 endpoint that waits 200-400 ms before every request and
// takes request bodies at 1 MiB/s, with storage.request_timeout_sec: 3, so
// that one upload lasts many times the request bound. The slow sink holds
// the stream back (the slot's lag grows while pg-cdc waits on its
// uploads) instead of pg-cdc buffering what it reads: its peak RSS stays
// under the same 256 MiB as a million-row transaction's, no upload fails
// for being slow (only a stalled one would), and nothing is lost.
func TestSlowSinkBoundedMemory(t *testing.T) {
	waitBound(t)
	if testing.Short() {
		t.Skip("long: 400,000 rows through a slow sink")
	}
	const rows, batch = 400_000, 20_000
	var proxy *faultProxy
	// Epochs of up to 250,000 rows (flushed by rows, not by a 10 s
	// interval) make delta files of about 9 MiB: multipart uploads whose
	// first part (8 MiB) takes 8 s at 1 MiB/s.
	// Compaction is off: this bounds the stream's memory, and a major
	// compaction beside it (on by default) adds its own, measured in
	// BENCHMARKS.md ("Compaction") and summed in operations.md.
	e := newEnv(t, envOptions{sink: "s3", memoryBudget: 16 << 20, maxRows: 250_000, flushInterval: 10, extraYAML: "compaction:\n  interval: 0s\n", s3Via: func(endpoint string) string {
		proxy = newFaultProxy(t, endpoint)
		return proxy.URL
	}})
	e.procEnv = append(e.procEnv, "PGCDC_STORAGE_REQUEST_TIMEOUT_SEC=3")
	e.exec(`CREATE TABLE events (id bigint PRIMARY KEY, kind text, payload text, at timestamptz)`)
	e.exec(`CREATE TABLE counters (id int PRIMARY KEY, n bigint)`)
	e.exec(`INSERT INTO counters SELECT g, 0 FROM generate_series(1, 100) g`)
	e.mustRun("init")
	proxy.slowDelay, proxy.slowRate = 200*time.Millisecond, 1<<20
	proxy.set("slow")
	s := e.startSampler()
	d := e.start()
	e.waitSlotActive(60 * time.Second)

	// The slot's lag (WAL written but not yet confirmed) and pg-cdc's
	// resident memory, sampled while the rows stream.
	var (
		mu      sync.Mutex
		maxLag  int64
		maxRSS  int64 // KiB
		samples int
	)
	ctx, stopSampling := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		conn, err := pgx.Connect(ctx, e.url)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		for ctx.Err() == nil {
			var lag int64
			err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn() - confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1`, e.slot).Scan(&lag)
			rss := rssKiB(d.cmd.Process.Pid)
			mu.Lock()
			if err == nil {
				maxLag = max(maxLag, lag)
			}
			maxRSS = max(maxRSS, rss)
			samples++
			mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	started := time.Now()
	var walBefore string
	if err := e.conn.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&walBefore); err != nil {
		t.Fatal(err)
	}
	// Batches of plain inserts, and many small transactions in between.
	for i := 0; i < rows; i += batch {
		e.exec(`INSERT INTO events SELECT g, 'k' || g % 7, md5(g::text) || md5((g * 31)::text) || repeat('p', 120), now()
		        FROM generate_series($1::bigint, $2::bigint) g`, i+1, i+batch)
		for j := 0; j < 20; j++ {
			e.exec(`UPDATE counters SET n = n + 1 WHERE id = $1`, 1+(i/batch*20+j)%100)
		}
	}
	var walBytes int64
	if err := e.conn.QueryRow(context.Background(), "SELECT pg_current_wal_lsn() - $1::pg_lsn", walBefore).Scan(&walBytes); err != nil {
		t.Fatal(err)
	}
	t.Logf("workload: %d rows, %.1f MiB of WAL in %v", rows, float64(walBytes)/(1<<20), time.Since(started).Round(100*time.Millisecond))
	e.waitCaughtUp(10 * time.Minute)
	t.Logf("caught up %v after the workload began", time.Since(started).Round(100*time.Millisecond))
	stopSampling()
	<-sampled
	d.stop()
	s.check()

	peakMiB := float64(d.maxRSSKiB()) / 1024
	mu.Lock()
	t.Logf("peak RSS %.1f MiB (sampled %.1f MiB); slot lag up to %.1f MiB; %d samples; %d requests slowed",
		peakMiB, float64(maxRSS)/1024, float64(maxLag)/(1<<20), samples, proxy.injected["slow"].Load())
	lagMiB := float64(maxLag) / (1 << 20)
	mu.Unlock()
	if peakMiB >= 256 {
		t.Errorf("peak RSS %.1f MiB through a slow sink, want < 256 MiB", peakMiB)
	}
	// The stream waited for the sink: WAL piled up in PostgreSQL, a good
	// part of what the workload wrote, rather than in pg-cdc.
	if lagMiB < float64(walBytes)/(1<<20)/4 {
		t.Errorf("the slot lagged at most %.1f MiB behind %.1f MiB of WAL: the sink did not hold the stream back", lagMiB, float64(walBytes)/(1<<20))
	}
	// The largest delta file went up at the throttled rate, so its upload
	// (or its first part's, at most 8 MiB) lasted at least twice the
	// request bound.
	var largest int64
	for _, mt := range e.manifest().Tables {
		for _, dl := range mt.Deltas {
			for _, f := range dl.Files {
				largest = max(largest, f.Bytes)
			}
		}
	}
	t.Logf("largest delta file %.1f MiB: at least %v to upload at %d KiB/s", float64(largest)/(1<<20),
		time.Duration(float64(largest)/float64(proxy.slowRate)*float64(time.Second)).Round(100*time.Millisecond), proxy.slowRate>>10)
	if largest < int64(2*3*proxy.slowRate) {
		t.Errorf("the largest delta file has %d bytes; the test wants uploads that outlast the 3 s request bound twice", largest)
	}
	// Slow is not stalled: no upload was abandoned, no session failed.
	if out := d.out.String(); strings.Contains(out, "replication session failed") {
		t.Errorf("a session failed on a slow but working sink:\n%s", lines(withoutDebug(out), 30))
	}
	assertSinkEqualsSource(t, e, "public.events", "public.counters")
	assertManifestFilesExist(t, e)
}

// sessionFailures returns when each "replication session failed" line of
// a daemon's log was written between from and to, as offsets from from.
func sessionFailures(out string, from, to time.Time) []time.Duration {
	var at []time.Duration
	for _, m := range regexp.MustCompile(`(?m)^time=(\S+) level=WARN msg="replication session failed; retrying"`).FindAllStringSubmatch(out, -1) {
		ts, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil || ts.Before(from) || ts.After(to) {
			continue
		}
		at = append(at, ts.Sub(from).Round(10*time.Millisecond))
	}
	return at
}

// slotConfirmed reads the test slot's confirmed_flush_lsn.
func slotConfirmed(t *testing.T, e *env) cdc.LSN {
	t.Helper()
	var s string
	if err := e.conn.QueryRow(context.Background(), "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", e.slot).Scan(&s); err != nil {
		t.Fatal(err)
	}
	lsn, err := cdc.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// rssKiB reads a running process's resident set (VmRSS) from /proc, or 0.
func rssKiB(pid int) int64 {
	return procStatusKiB(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:")
}

// TestFlushLongerThanWalSenderTimeout: a flush to a slow sink outlasts the
// server's wal_sender_timeout (3 s here), during which pg-cdc sends no
// standby status, so PostgreSQL ends the replication connection. The flush
// still commits; the session then fails as a transient connection error
// and the next one resumes from the new manifest: the stream goes on,
// nothing is lost, nothing is confirmed past the manifest.
func TestFlushLongerThanWalSenderTimeout(t *testing.T) {
	waitBound(t)
	if testing.Short() {
		t.Skip("long: flushes of several seconds")
	}
	cluster := pgtest.NewWith(t, pgtest.Options{Settings: []string{"wal_sender_timeout = '3s'"}})
	var proxy *faultProxy
	e := newEnv(t, envOptions{cluster: cluster, sink: "s3", maxRows: 150_000, flushInterval: 10, s3Via: func(endpoint string) string {
		proxy = newFaultProxy(t, endpoint)
		return proxy.URL
	}})
	e.exec(`CREATE TABLE events (id bigint PRIMARY KEY, kind text, payload text, at timestamptz)`)
	e.mustRun("init")
	proxy.slowDelay, proxy.slowRate = 200*time.Millisecond, 1<<20
	proxy.set("slow")
	s := e.startSampler()
	d := e.start()
	e.waitSlotActive(60 * time.Second)
	for i := 0; i < 300_000; i += 50_000 {
		e.exec(`INSERT INTO events SELECT g, 'k' || g % 7, md5(g::text) || md5((g * 31)::text) || repeat('p', 120), now()
		        FROM generate_series($1::bigint, $2::bigint) g`, i+1, i+50_000)
	}
	e.waitCaughtUp(5 * time.Minute)
	d.stop()
	s.check()
	out := d.out.String()
	var long []string
	for _, m := range regexp.MustCompile(`msg="flushed epoch" epoch=(\d+) [^\n]* duration_ms=(\d+)`).FindAllStringSubmatch(out, -1) {
		if ms, _ := strconv.Atoi(m[2]); ms > 3000 {
			long = append(long, "epoch "+m[1]+": "+m[2]+" ms")
		}
	}
	failed := regexp.MustCompile(`msg="replication session failed; retrying" err="([^"]*)"`).FindAllStringSubmatch(out, -1)
	t.Logf("flushes longer than wal_sender_timeout: %v; sessions failed: %d", long, len(failed))
	for _, f := range failed {
		t.Logf("  %s", f[1])
	}
	if len(long) == 0 {
		t.Errorf("no flush outlasted wal_sender_timeout; the test wants one")
	}
	assertSinkEqualsSource(t, e, "public.events")
	assertManifestFilesExist(t, e)
}
