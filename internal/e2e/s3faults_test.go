package e2e

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// faultProxy sits between pg-cdc and versitygw and injects one kind of
// fault at a time into the requests it forwards.
type faultProxy struct {
	*httptest.Server
	mu   sync.Mutex
	mode string // "", "5xx", "blackhole", "reset-parts", "truncate", "down", "slow"
	// holds records, for every request the blackhole held, how long and
	// whether the client gave up on it (true) or the blackhole ended first.
	holds    []hold
	injected map[string]*atomic.Int64
	// slowDelay and slowRate shape the "slow" mode: every request waits a
	// random time in [slowDelay, 2*slowDelay) before it is forwarded, and
	// request bodies are read at slowRate bytes per second.
	slowDelay time.Duration
	slowRate  int
}

type hold struct {
	kind      string // "part" (a multipart part upload), or the method
	d         time.Duration
	abandoned bool
}

func newFaultProxy(t *testing.T, target string) *faultProxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{injected: map[string]*atomic.Int64{}}
	for _, m := range []string{"5xx", "blackhole", "reset-parts", "truncate", "down", "slow"} {
		p.injected[m] = &atomic.Int64{}
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		mode := p.mode
		p.mu.Unlock()
		switch {
		case mode == "5xx" && r.Method == http.MethodPut:
			p.injected[mode].Add(1)
			w.Header().Set("Content-Type", "application/xml")
			if p.injected[mode].Load()%2 == 0 {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
			} else {
				w.WriteHeader(http.StatusInternalServerError)
				fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>injected</Message></Error>`)
			}
			return
		case mode == "blackhole":
			// Take the request and answer nothing until the mode changes,
			// then let it through; a client that gives up first is gone
			// (its request is dropped). The body is read first: only then
			// does the server notice a client that closes the connection.
			p.injected[mode].Add(1)
			began := time.Now()
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			for p.currentMode() == "blackhole" {
				select {
				case <-r.Context().Done():
					p.hold(r, time.Since(began), true)
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
			p.hold(r, time.Since(began), false)
		case mode == "down":
			// A store that is up but refuses all work.
			p.injected[mode].Add(1)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>ServiceUnavailable</Code><Message>injected: down</Message></Error>`)
			return
		case mode == "slow":
			p.injected[mode].Add(1)
			time.Sleep(p.slowDelay + rand.N(p.slowDelay))
			if r.ContentLength != 0 {
				r.Body = &throttled{r: r.Body, rate: p.slowRate, start: time.Now()}
			}
		case mode == "reset-parts" && r.Method == http.MethodPut && r.URL.Query().Has("partNumber"):
			p.injected[mode].Add(1)
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.(*net.TCPConn).SetLinger(0) // RST, not FIN
					c.Close()
					return
				}
			}
			panic(http.ErrAbortHandler)
		case mode == "truncate" && r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "":
			p.injected[mode].Add(1)
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(body[:len(body)/2]) // Content-Length promises the rest
			panic(http.ErrAbortHandler)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *faultProxy) currentMode() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

func (p *faultProxy) set(mode string) {
	p.mu.Lock()
	p.mode = mode
	p.mu.Unlock()
}

func (p *faultProxy) hold(r *http.Request, d time.Duration, abandoned bool) {
	kind := r.Method
	if r.URL.Query().Has("partNumber") {
		kind = "part"
	}
	p.mu.Lock()
	p.holds = append(p.holds, hold{kind: kind, d: d, abandoned: abandoned})
	p.mu.Unlock()
}

// held returns the blackhole's holds so far.
func (p *faultProxy) held() []hold {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]hold(nil), p.holds...)
}

// throttled reads r at about rate bytes per second, in small pieces, as a
// slow link delivers a body.
type throttled struct {
	r     io.ReadCloser
	rate  int
	start time.Time
	read  int
}

func (t *throttled) Read(p []byte) (int, error) {
	// Ahead of the rate: wait until the bytes read so far are due.
	if due := t.start.Add(time.Duration(float64(t.read) / float64(t.rate) * float64(time.Second))); time.Now().Before(due) {
		time.Sleep(time.Until(due))
	}
	n, err := t.r.Read(p[:min(len(p), 16<<10)])
	t.read += n
	return n, err
}

func (t *throttled) Close() error { return t.r.Close() }

// TestS3Faults streams through a proxy that makes S3 fail in each way a
// real store does — 503 SlowDown and 500 answers, a blackhole (requests
// taken and not answered for 4 s), multipart part uploads reset mid-way,
// download bodies cut short — while a workload runs and compaction reads
// the files back. The SDK retries once (aws.max_retries: 1), so longer
// faults fail a flush and the session is retried with backoff from the
// manifest. Retries are bounded and recover, no manifest ever names a
// missing file, the slot is never confirmed past the manifest, and the
// merged state equals the source. (Longer outages: sinkoutage_test.go.)
func TestS3Faults(t *testing.T) {
	var proxy *faultProxy
	e := newEnv(t, envOptions{sink: "s3", extraYAML: "gc:\n  grace_period: 1s\nhistory:\n  retention: 1s\naws:\n  max_retries: 1\n", s3Via: func(endpoint string) string {
		proxy = newFaultProxy(t, endpoint)
		return proxy.URL
	}})
	seed(t, e, 50, 100)
	e.mustRun("init")
	s := e.startSampler()
	d := e.start()
	base := "http://" + metricsAddr(t, d)
	w := runWorkloadFor(e.url, 4, 20*time.Second)
	e.waitProgress(e.manifest().EndLSN, 60*time.Second)
	if n := counter(scrape(t, base), "pgcdc_sink_errors_total", nil); n != 0 {
		t.Fatalf("sink errors counted before any fault: %v", n)
	}

	for _, phase := range []struct {
		mode string
		hold time.Duration
	}{{"5xx", 3 * time.Second}, {"blackhole", 4 * time.Second}} {
		from := e.manifest().EndLSN
		proxy.set(phase.mode)
		time.Sleep(phase.hold)
		proxy.set("")
		e.waitProgress(from, 90*time.Second) // the stream recovers by itself
		assertManifestFilesExist(t, e)
	}

	// One transaction of about 12 MiB of Parquet: its delta goes up in
	// parts, and the first part uploads are reset.
	proxy.set("reset-parts")
	from := e.manifest().EndLSN
	e.exec(`INSERT INTO orders SELECT g, 1, 0, 'big', '{}', now(),
	          (SELECT string_agg(md5(random()::text || i || g), '') FROM generate_series(1, 250) i)
	        FROM generate_series(100000, 102999) g`)
	e.waitFor("a reset part upload", 60*time.Second, func() bool { return proxy.injected["reset-parts"].Load() > 0 })
	proxy.set("")
	e.waitProgress(from, 120*time.Second)

	// Compaction reads the files back; cut bodies fail the pass, which
	// changes nothing, and the next pass succeeds.
	proxy.set("truncate")
	code, out := e.run("compact")
	proxy.set("")
	if code == 0 && proxy.injected["truncate"].Load() == 0 {
		t.Fatalf("compact read nothing through the proxy:\n%s", out)
	}
	assertManifestFilesExist(t, e)

	w.wait(t)
	touchAll(e)
	e.waitCaughtUp(120 * time.Second)
	e.mustRun("compact")
	// The error counter moved: failed attempts the SDK retried by itself,
	// and requests that failed after its retries (which restarted a
	// session).
	fams := scrape(t, base)
	attempts := counter(fams, "pgcdc_sink_errors_total", map[string]string{"kind": "attempt"})
	requests := counter(fams, "pgcdc_sink_errors_total", map[string]string{"kind": "request"})
	if attempts == 0 || requests == 0 {
		t.Errorf("pgcdc_sink_errors_total did not move under faults: %v failed attempts, %v failed requests", attempts, requests)
	}
	if counter(fams, "pgcdc_reconnects_total", nil) == 0 {
		t.Errorf("pgcdc_reconnects_total did not move although sessions were retried")
	}
	t.Logf("sink errors: %v failed attempts, %v failed requests", attempts, requests)
	d.stop()
	s.check()
	for _, mode := range []string{"5xx", "blackhole", "reset-parts", "truncate"} {
		n := proxy.injected[mode]
		if n.Load() == 0 {
			t.Errorf("no %s fault was injected", mode)
		}
		t.Logf("%s: %d requests faulted", mode, n.Load())
	}
	// With one SDK retry, three seconds of 5xx outlast a request: the
	// flush fails and the session is retried with backoff.
	if !strings.Contains(d.out.String(), `msg="replication session failed; retrying"`) || !strings.Contains(d.out.String(), "sink request failed") {
		t.Errorf("no session was retried after the sink failed:\n%s", lines(withoutDebug(d.out.String()), 30))
	}
	assertSinkEqualsSource(t, e, "public.customers", "public.orders", "public.items")
	assertManifestFilesExist(t, e)
}
