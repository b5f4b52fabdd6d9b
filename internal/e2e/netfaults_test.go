package e2e

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/pgtest"
)

// TestReplicationConnectionFaults puts a TCP proxy between pg-cdc and
// PostgreSQL and breaks the path under a running workload: first every
// connection is reset, then the network goes silent (a blackhole: bytes
// are held, nothing is closed) for longer than wal_sender_timeout. The
// daemon must notice both by itself (the blackhole through its receive
// timeout, since no error ever arrives), reconnect, count the reconnects,
// lose nothing and never confirm past the manifest.
func TestReplicationConnectionFaults(t *testing.T) {
	waitBound(t)
	cluster := pgtest.NewWith(t, pgtest.Options{Settings: []string{"wal_sender_timeout = '3s'"}})
	e := newEnv(t, envOptions{cluster: cluster, flushInterval: 1})
	seed(t, e, 20, 20)
	e.mustRun("init")

	proxy := startTCPProxy(t, "127.0.0.1:"+strconv.Itoa(cluster.Port))
	viaProxy := strings.Replace(e.url, "127.0.0.1:"+strconv.Itoa(cluster.Port), proxy.addr(), 1)
	if viaProxy == e.url {
		t.Fatalf("cannot route %s through the proxy", e.url)
	}
	if strings.Contains(viaProxy, "?") {
		viaProxy += "&connect_timeout=2"
	} else {
		viaProxy += "?connect_timeout=2"
	}
	d := e.start("PGCDC_SOURCE_POSTGRES_URL="+viaProxy,
		"PGCDC_REPLICATION_RECEIVE_TIMEOUT_SEC=2", // raised to wal_sender_timeout, 3 s
		"PGCDC_RETRY_INITIAL_BACKOFF=200ms", "PGCDC_RETRY_MAX_BACKOFF=1s", "PGCDC_RETRY_MAX_ATTEMPTS=30")
	base := "http://" + metricsAddr(t, d)
	waitHTTP(t, base+"/readyz", http.StatusOK, 60*time.Second)
	s := e.startSampler()

	w := runWorkloadFor(e.url, 31, 20*time.Second)
	reconnects := func() float64 { return counter(scrape(t, base), "pgcdc_reconnects_total", nil) }
	streamed := func() int { return strings.Count(d.out.String(), "msg=streaming") }

	// 1. Reset every connection mid-stream.
	e.waitProgress(e.manifest().EndLSN, 30*time.Second)
	sessions := streamed()
	proxy.reset()
	e.waitFor("a reconnect after the reset", 30*time.Second, func() bool {
		return reconnects() >= 1 && streamed() > sessions
	})

	// 2. A silent network for longer than wal_sender_timeout.
	e.waitProgress(e.manifest().EndLSN, 30*time.Second)
	before := reconnects()
	sessions = streamed()
	proxy.setBlackhole(true)
	began := time.Now()
	// Noticed by the receive timeout (3 s: nothing else reports a silent
	// network), with slack for a loaded machine.
	e.waitFor("the daemon to notice the silent network", 15*time.Second, func() bool {
		return strings.Contains(d.out.String(), "replication connection silent")
	})
	// Keep the path silent past wal_sender_timeout (3 s), so the server has
	// ended its side too and the next session finds a dead walsender.
	time.Sleep(5*time.Second - time.Since(began))
	proxy.setBlackhole(false)
	e.waitFor("a new session after the blackhole", 60*time.Second, func() bool {
		return reconnects() > before && streamed() > sessions
	})

	w.wait(t)
	touchAll(e)
	e.waitCaughtUp(60 * time.Second)
	d.stop()
	s.check()
	assertSinkEqualsSource(t, e, "public.customers", "public.orders", "public.items")
}

// tcpProxy forwards connections to a target and can break them: reset
// closes every open connection at once; a blackhole holds every byte in
// both directions (and leaves new connections unanswered) until lifted,
// like a route that silently drops packets.
type tcpProxy struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	hole  bool
	open  chan struct{} // closed while the path is open
}

func startTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{t: t, ln: ln, target: target, conns: map[net.Conn]struct{}{}, open: make(chan struct{})}
	close(p.open)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { p.serve(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.reset()
		p.setBlackhole(false)
		wg.Wait()
	})
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.mu.Unlock()
}

func (p *tcpProxy) serve(client net.Conn) {
	p.track(client)
	defer client.Close()
	p.wait() // an unanswered connection while the path is down
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.track(server)
	defer server.Close()
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(server, client) })
	wg.Go(func() { p.pipe(client, server) })
	wg.Wait()
}

// pipe copies src to dst, holding each chunk while the path is down.
func (p *tcpProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.wait()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				src.Close()
			}
			return
		}
	}
}

func (p *tcpProxy) wait() {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	<-open
}

// reset closes every connection with a RST.
func (p *tcpProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
	}
	clear(p.conns)
}

func (p *tcpProxy) setBlackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on == p.hole {
		return
	}
	p.hole = on
	if on {
		p.open = make(chan struct{})
	} else {
		close(p.open)
	}
}
