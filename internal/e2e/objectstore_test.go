package e2e

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// TestObjectStoreSinks runs the streaming core's scenario on S3 (versitygw)
// and GCS (fake-gcs-server), both real servers on loopback: snapshot, an
// insert/update/delete/truncate workload, kill -9 of the daemon in the
// middle and a restart, with compaction every two seconds inside start and
// a `pg-cdc compact` process racing it on the keys the workload updates and
// deletes. The slot is never confirmed past the manifest, and the merged
// state equals the source.
func TestObjectStoreSinks(t *testing.T) {
	for _, kind := range []string{"s3", "gcs"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, envOptions{sink: kind, extraYAML: compactionYAML})
			seed(t, e, 50, 100)
			e.mustRun("init")
			assertSinkEqualsSource(t, e, "public.customers", "public.orders", "public.items")

			s := e.startSampler()
			d := e.start()
			w := runWorkloadFor(e.url, 2, 10*time.Second)
			e.waitProgress(e.manifest().EndLSN, 60*time.Second)
			d.kill()
			d = e.start()
			e.waitProgress(e.manifest().EndLSN, 60*time.Second)
			// A second start with another slot on the same prefix is
			// refused while the first keeps running: there is no writer
			// lock on a bucket, the manifest names its owner.
			cfg, err := os.ReadFile(e.config)
			if err != nil {
				t.Fatal(err)
			}
			other := filepath.Join(e.dir, "other-slot.yml")
			if err := os.WriteFile(other, []byte(strings.Replace(string(cfg), "slot: "+e.slot, "slot: other_slot", 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			if code, out := e.runWith(other, "start"); code != 12 || !strings.Contains(out, `"other_slot"`) {
				t.Errorf("a second start with another slot on the prefix: exit %d, want 12:\n%s", code, out)
			}
			e.mustRun("compact") // races the compaction inside start
			w.wait(t)
			touchAll(e)
			e.waitCaughtUp(90 * time.Second)
			d.stop()
			s.check()

			m := e.manifest()
			if b := m.Tables["public.orders"].Base; b == nil || b.CompactedAt == nil {
				t.Errorf("orders was never compacted on %s: %+v", kind, b)
			}
			assertSinkEqualsSource(t, e, "public.customers", "public.orders", "public.items")
			assertManifestFilesExist(t, e)
		})
	}
}

// TestProbeRefusesSinkIgnoringConditionalWrites points init and start at an
// S3 endpoint that accepts every put whatever its If-Match or If-None-Match
// says, as some S3-compatible stores do: both refuse it with exit 14 before
// writing anything else, and run on it only when the config accepts the
// single-writer risk.
func TestProbeRefusesSinkIgnoringConditionalWrites(t *testing.T) {
	lax := newLaxS3(t)
	e := newEnv(t, envOptions{})
	e.exec(`CREATE TABLE t (id int PRIMARY KEY)`)
	e.procEnv = []string{"AWS_ACCESS_KEY_ID=k", "AWS_SECRET_ACCESS_KEY=s", "AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true"}
	storage := "storage:\n  type: s3\n  bucket: b\n  endpoint: " + lax.URL + "\n  force_path_style: true\n"
	cfg, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, extra string) string {
		p := filepath.Join(e.dir, name)
		body := regexp.MustCompile(`(?m)^storage:\n(  .*\n)+`).ReplaceAllString(string(cfg), storage+extra)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	strict := write("strict.yml", "")
	for _, cmd := range []string{"init", "start"} {
		code, out := e.runWith(strict, cmd)
		if code != 14 || !strings.Contains(out, "ignores conditional writes") || !strings.Contains(out, "accept_single_writer_risk") {
			t.Errorf("%s on a sink ignoring conditional writes: exit %d, want 14 naming the setting:\n%s", cmd, code, out)
		}
	}
	if n := lax.manifestPuts(); n != 0 {
		t.Errorf("a refused sink received %d manifest writes", n)
	}
	risky := write("risky.yml", "  accept_single_writer_risk: true\n")
	code, out := e.runWith(risky, "init")
	if code == 14 || !strings.Contains(out, "running anyway because storage.accept_single_writer_risk is set") {
		t.Errorf("init accepting the single-writer risk: exit %d, want it to go on with a warning:\n%s", code, out)
	}
}

// laxS3 is the smallest path-style S3 endpoint: put, get, head and delete
// of objects in memory, every conditional header ignored.
type laxS3 struct {
	*httptest.Server
	mu       sync.Mutex
	objects  map[string][]byte
	manifest int
}

func newLaxS3(t *testing.T) *laxS3 {
	s := &laxS3{objects: map[string][]byte{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *laxS3) manifestPuts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.manifest
}

func (s *laxS3) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := r.URL.Path
	switch r.Method {
	case http.MethodPut:
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.objects[key] = body
		if strings.HasSuffix(key, "/_pgcdc/manifest.json") {
			s.manifest++
		}
		w.Header().Set("ETag", etag(body))
	case http.MethodGet, http.MethodHead:
		body, ok := s.objects[key]
		if !ok {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>no such key</Message></Error>`)
			return
		}
		w.Header().Set("ETag", etag(body))
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		if r.Method == http.MethodGet {
			w.Write(body)
		}
	case http.MethodDelete:
		delete(s.objects, key)
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "not implemented", http.StatusNotImplemented)
	}
}

func etag(b []byte) string {
	sum := md5.Sum(b)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

// TestPausedWriterIsSuperseded pauses a streamer on S3 between uploading an
// epoch's files and committing its manifest (SIGSTOP at a failpoint), lets
// a second streamer take over the slot and commit, then resumes the first:
// its manifest write fails and it exits 13 naming the other writer, and no
// manifest version after the takeover comes from the paused writer.
func TestPausedWriterIsSuperseded(t *testing.T) {
	e := newEnv(t, envOptions{sink: "s3"})
	seed(t, e, 50, 100)
	e.mustRun("init")
	s := e.startSampler()

	// Record the writer of every manifest version seen.
	var (
		mu      sync.Mutex
		writers []string
	)
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		last := ""
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(20 * time.Millisecond):
			}
			data, err := e.manifestBytes()
			if err != nil {
				continue
			}
			m, err := manifest.Decode(data)
			if err != nil || m.Writer == "" || m.Writer == last {
				continue
			}
			last = m.Writer
			mu.Lock()
			writers = append(writers, m.Writer)
			mu.Unlock()
		}
	}()

	a := e.start("PGCDC_FAILPOINTS=flush/after-deltas=stop@3")
	w := runWorkloadFor(e.url, 6, 12*time.Second)
	e.waitFor("the first streamer to stop at the failpoint", 60*time.Second, func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", a.cmd.Process.Pid))
		if err != nil {
			return false
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		return len(f) > 0 && f[0] == "T"
	})
	stoppedAt := e.manifest()
	// Its walsender is ended, as PostgreSQL would after wal_sender_timeout.
	e.exec(`SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active`, e.slot)
	e.waitFor("the slot to be released", 30*time.Second, func() bool {
		var active bool
		err := e.conn.QueryRow(t.Context(), "SELECT active FROM pg_replication_slots WHERE slot_name = $1", e.slot).Scan(&active)
		return err == nil && !active
	})
	b := e.start()
	// The second streamer's own write, not just any progress: the resumed
	// writer must find a manifest another writer has moved on.
	e.waitFor("the second streamer's first manifest write", 60*time.Second, func() bool {
		data, err := e.manifestBytes()
		if err != nil {
			return false
		}
		m, err := manifest.Decode(data)
		return err == nil && m.Writer != "" && m.Writer != stoppedAt.Writer && m.EndLSN > stoppedAt.EndLSN
	})
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(60 * time.Second); code != 13 || !strings.Contains(a.out.String(), "mixing two lineages") {
		t.Fatalf("the resumed writer: exit %d, want 13 naming the takeover:\n%s", code, lines(withoutDebug(a.out.String()), 20))
	}
	w.wait(t)
	touchAll(e)
	e.waitCaughtUp(90 * time.Second)
	b.stop()
	close(stopWatch)
	<-watched
	s.check()

	mu.Lock()
	defer mu.Unlock()
	if len(writers) < 2 {
		t.Fatalf("saw writers %v; want the first streamer's, then the second's", writers)
	}
	first := writers[0]
	for i, wr := range writers[1:] {
		if wr == first {
			t.Errorf("manifest version %d after the takeover was written by the paused writer %s (writers %v)", i+1, first, writers)
		}
	}
	assertSinkEqualsSource(t, e, "public.customers", "public.orders", "public.items")
}
