package serve

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/pg-cdc/pg-cdc/internal/httpproblem"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/pg-cdc/pg-cdc/internal/access"
)

// Observer is told of every request (metrics.Serve implements it).
type Observer interface {
	Request(surface string, status int, d time.Duration)
	RateLimited(principal string)
	InFlight(delta int)
	// Refused counts an answer of one of RefusalCodes, on surface
	// (access.SurfaceREST, SurfaceSSE, SurfaceMCP or SurfaceMetrics).
	Refused(surface string, status int)
}

// Options configure a Server.
type Options struct {
	// Listen is the address to bind (serve.listen).
	Listen string
	// Tokens are the principals; none means anonymous, loopback only.
	Tokens Tokens
	// RatePerSecond and Burst bound each principal's requests to the
	// surfaces (0: DefaultRate, DefaultBurst).
	RatePerSecond float64
	Burst         int
	// UnauthRatePerSecond and UnauthBurst bound, per remote address, the
	// requests that fail authentication (no token, or a wrong one) (0:
	// DefaultUnauthRate, DefaultUnauthBurst). Past them, 429 with
	// Retry-After before the token is even checked, so a client guessing
	// tokens is slowed to this rate. MaxPeers bounds the addresses
	// remembered (0: DefaultMaxPeers). UnauthOff turns the limit off
	// (serve.unauthenticated_rate_limit: 0), the rate and burst unused:
	// behind a proxy every client has the proxy's address, and one
	// client's failures would refuse the others too.
	UnauthRatePerSecond float64
	UnauthBurst         int
	MaxPeers            int
	UnauthOff           bool
	// HashSQL writes a query's SQL into its audit record as its SHA-256
	// and length only (serve.audit_sql: hash), on every surface: the
	// server's records, and the MCP server's of Surfaces and StdioMCP.
	HashSQL bool
	// MaxConcurrent bounds the requests to the surfaces running at once
	// (0: DefaultConcurrent); QueueWait is how long one waits for a slot.
	MaxConcurrent int
	QueueWait     time.Duration
	// MaxStreams bounds the event streams open at once (0:
	// DefaultStreams). A stream holds no slot while it waits; each of its
	// reads takes one (access.Gate), like a request.
	MaxStreams int
	// MaxBodyBytes caps a request body (0: DefaultMaxBody).
	MaxBodyBytes int64
	// WriteTimeout bounds writing a response (0: DefaultWriteTimeout); it
	// must exceed the query timeout. Event streams are exempt: each of
	// their writes has WriteTimeout of its own instead.
	WriteTimeout time.Duration

	// REST is mounted at /v1/, MCP at /mcp; Metrics at /metrics; Livez and
	// Readyz answer the probes (nil: 200).
	REST, MCP, Metrics http.Handler
	// Events (server-sent events, internal/events) is mounted at
	// /v1/stream/: authenticated, rate-limited and audited like REST, but
	// holding no concurrency slot (a stream lasts as long as its client)
	// and exempt from the read and write timeouts.
	Events   http.Handler
	Ready    func(ctx context.Context) error
	Observer Observer
	Log      *slog.Logger
}

// Defaults of Options.
const (
	DefaultRate         = 20.0
	DefaultBurst        = 40
	DefaultConcurrent   = 4
	DefaultQueueWait    = 5 * time.Second
	DefaultStreams      = 64
	DefaultMaxBody      = 1 << 20
	DefaultWriteTimeout = 2 * time.Minute
)

// Server is the read path's HTTP server.
type Server struct {
	o       Options
	handler http.Handler
	slots   chan struct{}
	open    atomic.Int64 // event streams open

	mu       sync.Mutex
	limiters map[string]*rate.Limiter

	// peers are the remote addresses that failed authentication or were
	// refused; logLimit caps refusal lines over all of them.
	peers    *peers
	logLimit *rate.Limiter
	now      func() time.Time

	// streams ends every event stream when the server shuts down: the
	// requests' own contexts outlive the stop request, so that running
	// requests finish, but a stream would never finish by itself.
	streams     context.Context
	stopStreams context.CancelFunc
}

// ErrNeedsTokens: a bind beyond loopback without tokens.
var ErrNeedsTokens = errors.New("serve: a listen address other than loopback needs tokens")

// New checks o and builds the server. A non-loopback listen address without
// tokens is refused: the data would be open to the network.
func New(o Options) (*Server, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if len(o.Tokens) == 0 && !loopback(o.Listen) {
		return nil, fmt.Errorf("%w: serve.listen is %q; set serve.tokens (pg-cdc serve token NAME prints one) or listen on 127.0.0.1", ErrNeedsTokens, o.Listen)
	}
	if o.RatePerSecond < 0 || o.Burst < 0 || o.UnauthRatePerSecond < 0 || o.UnauthBurst < 0 || o.MaxPeers < 0 || o.MaxConcurrent < 0 || o.MaxBodyBytes < 0 || o.QueueWait < 0 || o.WriteTimeout < 0 || o.MaxStreams < 0 {
		return nil, fmt.Errorf("serve: negative limit in %+v", o)
	}
	o.RatePerSecond = cmp.Or(o.RatePerSecond, DefaultRate)
	o.Burst = cmp.Or(o.Burst, DefaultBurst)
	o.MaxConcurrent = cmp.Or(o.MaxConcurrent, DefaultConcurrent)
	o.QueueWait = cmp.Or(o.QueueWait, DefaultQueueWait)
	o.MaxStreams = cmp.Or(o.MaxStreams, DefaultStreams)
	o.MaxBodyBytes = cmp.Or(o.MaxBodyBytes, DefaultMaxBody)
	o.WriteTimeout = cmp.Or(o.WriteTimeout, DefaultWriteTimeout)
	o.UnauthBurst = cmp.Or(o.UnauthBurst, DefaultUnauthBurst)
	o.MaxPeers = cmp.Or(o.MaxPeers, DefaultMaxPeers)
	if o.UnauthOff {
		o.UnauthRatePerSecond = 0 // from here on, 0 is off
	} else {
		o.UnauthRatePerSecond = cmp.Or(o.UnauthRatePerSecond, DefaultUnauthRate)
	}
	s := &Server{o: o, slots: make(chan struct{}, o.MaxConcurrent), limiters: map[string]*rate.Limiter{},
		peers:    newPeers(o.MaxPeers, o.UnauthRatePerSecond, o.UnauthBurst),
		logLimit: rate.NewLimiter(refusalLogRate, refusalLogBurst), now: time.Now}
	s.streams, s.stopStreams = context.WithCancel(context.Background())
	s.handler = s.routes()
	return s, nil
}

// Handler is the server's whole handler (for tests and embedding).
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	// The probes are not observed: a 503 from /readyz is an answer, not
	// a refusal.
	mux.Handle("GET /livez", s.limited(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})))
	mux.Handle("GET /readyz", s.limited(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.o.Ready != nil {
			if err := s.o.Ready(r.Context()); err != nil {
				problem(w, http.StatusServiceUnavailable, "not_ready", "Not ready", err.Error())
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})))
	// guarded is a route's whole chain: its refusals observed (outermost,
	// so the body cap's 413 is seen too), the body cap, then authed.
	guarded := func(surface string, k kind, h http.Handler) http.Handler {
		return s.observed(surface, s.limited(s.authed(surface, k, h)))
	}
	if s.o.Metrics != nil {
		mux.Handle("GET /metrics", guarded(SurfaceMetrics, kindPlain, s.o.Metrics))
	}
	if s.o.REST != nil {
		mux.Handle("/v1/", guarded(access.SurfaceREST, kindSurface, s.o.REST))
	}
	if s.o.Events != nil {
		// More specific than /v1/: the mux routes streams here.
		mux.Handle("/v1/stream/", guarded(access.SurfaceSSE, kindStream, s.o.Events))
	}
	if s.o.MCP != nil {
		mux.Handle("/mcp", guarded(access.SurfaceMCP, kindSurface, s.o.MCP))
	}
	return mux
}

// limited caps every request's body.
func (s *Server) limited(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > s.o.MaxBodyBytes {
			problem(w, http.StatusRequestEntityTooLarge, "body_too_large", "Request body too large",
				fmt.Sprintf("the body is %d bytes; at most %d are accepted", r.ContentLength, s.o.MaxBodyBytes))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.o.MaxBodyBytes)
		next.ServeHTTP(w, r)
	})
}

// Kinds of a route for authed.
type kind int

const (
	kindPlain   kind = iota // authenticated only (metrics)
	kindSurface             // rate-limited, one concurrency slot, audited
	kindStream              // an event stream: rate-limited and audited, no slot, no timeouts
)

// authed authenticates, then (for a surface) rate-limits, takes a
// concurrency slot (not for a stream) and writes the request's audit
// record.
func (s *Server) authed(surface string, k kind, next http.Handler) http.Handler {
	isSurface := k != kindPlain
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The per-address limit on failures: only with tokens (without,
		// nobody fails) and unless off.
		limitFailures := len(s.o.Tokens) > 0 && s.o.UnauthRatePerSecond > 0
		var key string
		if limitFailures {
			key, _ = callerOf(r).peer()
			// Before the token is looked at: an address over its failures
			// learns nothing more, a right guess included.
			if wait, over := s.peers.over(key, s.now()); over {
				w.Header().Set("Retry-After", retryAfter(wait))
				problem(w, http.StatusTooManyRequests, "rate_limited", "Too many requests",
					fmt.Sprintf("too many requests without a valid token from this address (%g/s, bursts of %d); wait before trying again",
						s.o.UnauthRatePerSecond, s.o.UnauthBurst))
				return
			}
		}
		p, ok := s.principal(r)
		if !ok {
			if limitFailures {
				s.peers.fail(key, s.now())
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="pg-cdc"`)
			problem(w, http.StatusUnauthorized, "unauthorized", "Unauthorized", "send a configured token as Authorization: Bearer <token>")
			return
		}
		noteCaller(r.Context(), p.String())
		ctx := access.WithPrincipal(r.Context(), p)
		if !isSurface {
			next.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		if wait, ok := s.allow(p); !ok {
			if s.o.Observer != nil {
				s.o.Observer.RateLimited(p.String())
			}
			w.Header().Set("Retry-After", retryAfter(wait))
			problem(w, http.StatusTooManyRequests, "rate_limited", "Too many requests",
				fmt.Sprintf("principal %s is over its rate limit (%g requests/s, bursts of %d)", p, s.o.RatePerSecond, s.o.Burst))
			return
		}
		rec := &access.Record{Principal: p, Surface: surface, Endpoint: r.Method + " " + r.URL.Path, Started: time.Now(), HashSQL: s.o.HashSQL}
		if k == kindStream {
			if n := s.open.Add(1); n > int64(s.o.MaxStreams) {
				s.open.Add(-1)
				w.Header().Set("Retry-After", "5")
				detail := fmt.Sprintf("%d event streams are open (serve.max_streams); try again", s.o.MaxStreams)
				problem(w, http.StatusServiceUnavailable, "busy", "Server busy", detail)
				rec.Status, rec.Error, rec.Duration = http.StatusServiceUnavailable, detail, time.Since(rec.Started)
				rec.Log(s.o.Log)
				return
			}
			defer s.open.Add(-1)
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(s.streams, cancel)()
			ctx = access.WithGate(ctx, s.gate)
		} else {
			release, ok := s.acquire(ctx)
			rec.Queued = time.Since(rec.Started)
			if !ok {
				w.Header().Set("Retry-After", "1")
				detail := fmt.Sprintf("%d requests are running (serve.max_concurrent); try again", s.o.MaxConcurrent)
				problem(w, http.StatusServiceUnavailable, "busy", "Server busy", detail)
				rec.Status, rec.Error, rec.Duration = http.StatusServiceUnavailable, detail, time.Since(rec.Started)
				if surface != access.SurfaceMCP {
					rec.Log(s.o.Log)
				}
				return
			}
			defer release()
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		var out http.ResponseWriter = sw
		if k == kindStream {
			out = newStreamWriter(sw, s.o.WriteTimeout)
		}
		next.ServeHTTP(out, r.WithContext(access.WithRecord(ctx, rec)))
		rec.Status, rec.Duration = sw.status, time.Since(rec.Started)
		if s.o.Observer != nil {
			s.o.Observer.Request(surface, rec.Status, rec.Duration)
		}
		if surface != access.SurfaceMCP { // the MCP server audits each tool call
			rec.Log(s.o.Log)
		}
	})
}

// principal authenticates a request: its bearer token, or anonymous on a
// server without tokens.
func (s *Server) principal(r *http.Request) (access.Principal, bool) {
	if len(s.o.Tokens) == 0 {
		return access.Principal{}, true
	}
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return access.Principal{}, false
	}
	return s.o.Tokens.authenticate(strings.TrimSpace(token))
}

// allow takes one request from p's bucket, or says how long to wait.
func (s *Server) allow(p access.Principal) (time.Duration, bool) {
	s.mu.Lock()
	l := s.limiters[p.String()]
	if l == nil {
		// Keyed by authenticated principals only: at most one per token.
		l = rate.NewLimiter(rate.Limit(s.o.RatePerSecond), s.o.Burst)
		s.limiters[p.String()] = l
	}
	s.mu.Unlock()
	res := l.Reserve()
	if d := res.Delay(); d > 0 {
		res.Cancel()
		return d, false
	}
	return 0, true
}

// gate is access.Gate over the concurrency slots, for a stream's reads.
func (s *Server) gate(ctx context.Context) (func(), error) {
	release, ok := s.acquire(ctx)
	if !ok {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %d requests are running (serve.max_concurrent)", access.ErrBusy, s.o.MaxConcurrent)
	}
	return release, nil
}

// acquire takes a concurrency slot, waiting at most QueueWait.
func (s *Server) acquire(ctx context.Context) (func(), bool) {
	t := time.NewTimer(s.o.QueueWait)
	defer t.Stop()
	select {
	case s.slots <- struct{}{}:
	case <-t.C:
		return nil, false
	case <-ctx.Done():
		return nil, false
	}
	if s.o.Observer != nil {
		s.o.Observer.InFlight(1)
	}
	return func() {
		<-s.slots
		if s.o.Observer != nil {
			s.o.Observer.InFlight(-1)
		}
	}, true
}

// statusWriter records the status a handler wrote. It passes Flush and the
// rest through (http.ResponseController unwraps it), for event streams.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// streamWriter is an event stream's writer: each write and flush gets a
// write deadline of its own, WriteTimeout from now, in place of the
// server's (which runs from the request's start and would cut every stream
// off). A client that stops reading is still cut off, one write timeout
// after. (ReadTimeout needs nothing: net/http clears the read deadline
// once a request without a body is read, for its background read.)
type streamWriter struct {
	*statusWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func newStreamWriter(sw *statusWriter, timeout time.Duration) *streamWriter {
	w := &streamWriter{statusWriter: sw, rc: http.NewResponseController(sw.ResponseWriter), timeout: timeout}
	w.extend()
	return w
}

// extend moves the write deadline (ErrNotSupported under a recorder: no
// deadline to move).
func (w *streamWriter) extend() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout)) }

func (w *streamWriter) Write(b []byte) (int, error) {
	w.extend()
	return w.statusWriter.Write(b)
}

func (w *streamWriter) WriteHeader(code int) {
	w.extend()
	w.statusWriter.WriteHeader(code)
}

// FlushError flushes what was written (http.ResponseController calls it).
func (w *streamWriter) FlushError() error {
	w.extend()
	return w.rc.Flush()
}

func (w *streamWriter) Flush() { _ = w.FlushError() }

func (w *streamWriter) Unwrap() http.ResponseWriter { return w.statusWriter }

// Listen binds the listen address now, so a taken port fails at start.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve: listen on %s: %w", addr, err)
	}
	return ln, nil
}

// Serve serves on ln until ctx is done, then shuts down, giving running
// requests up to five seconds.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 5 * time.Second, // a client that sends headers slowly is cut off
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      s.o.WriteTimeout,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.o.Log.Handler(), slog.LevelWarn),
		// Requests do not inherit the stop request: Shutdown lets the
		// running ones finish (up to five seconds); streams end at once.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	srv.RegisterOnShutdown(s.stopStreams)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// problem writes an RFC 9457 problem document.
func problem(w http.ResponseWriter, status int, code, title, detail string) {
	httpproblem.Write(w, nil, httpproblem.Problem{Status: status, Code: code, Title: title, Detail: detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
