package serve

import (
	"container/list"
	"context"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/pg-cdc/pg-cdc/internal/access"
)

// refusalCodes are the answers that turn a request away, counted by code
// (Observer.Refused) and logged at warn, whichever layer gave them: the
// body cap (413), authentication (401), the rate limits (429), the
// concurrency and stream caps (503), the surface itself (MCP's Host and
// Origin checks, 403; the API's 413 and 503).
// The list is access.RefusalCodes, shared with internal/metrics.
var refusalCodes = access.RefusalCodes

func refusalIndex(status int) int {
	for i, c := range refusalCodes {
		if c == status {
			return i
		}
	}
	return -1
}

// SurfaceMetrics labels the refusals of /metrics; the surfaces' own are
// access.SurfaceREST, SurfaceSSE and SurfaceMCP.
const SurfaceMetrics = access.SurfaceMetrics

// Bounds of the refusal log and the per-address state.
const (
	// DefaultUnauthRate and DefaultUnauthBurst bound the requests that
	// fail authentication, per remote address.
	DefaultUnauthRate  = 1.0
	DefaultUnauthBurst = 10
	// DefaultMaxPeers bounds the remote addresses remembered (about 300
	// bytes each); the least recently seen is forgotten first.
	DefaultMaxPeers = 10_000
	// refusalLogEvery is the most one remote address gets of refusal
	// lines of one code; the lines held back are counted in the next.
	refusalLogEvery = 10 * time.Second
	// refusalLogRate and refusalLogBurst cap refusal lines over every
	// address: many addresses (a botnet, an IPv6 range) write no more.
	refusalLogRate  = 10
	refusalLogBurst = 50
	// maxLoggedPath cuts a path in a refusal line: the path is the
	// client's, and a refusal line must stay small.
	maxLoggedPath = 256
)

// peer is what the server remembers of one remote address: its
// authentication failures and when a refusal of each code was last
// logged for it. Only addresses that failed or were refused have one:
// a client that authenticates costs nothing here.
type peer struct {
	key        string
	failures   *rate.Limiter // nil until its first failure
	logged     [len(refusalCodes)]time.Time
	suppressed [len(refusalCodes)]int
}

// peers is a least-recently-used set of peers, bounded at max: memory
// stays flat whatever the number of addresses. Forgetting an address
// that has been quiet for burst/rate seconds loses nothing (its bucket
// is full again, as a new one's); an attacker who cycles through more
// addresses than max to be forgotten has that many addresses anyway, and
// no per-address limit holds against that.
type peers struct {
	mu    sync.Mutex
	max   int
	rate  rate.Limit
	burst int
	byKey map[string]*list.Element // of *peer
	order *list.List               // front: most recently seen
}

func newPeers(max int, perSecond float64, burst int) *peers {
	return &peers{max: max, rate: rate.Limit(perSecond), burst: burst, byKey: map[string]*list.Element{}, order: list.New()}
}

// lookup returns key's peer, marked as just seen; create makes one
// (forgetting the least recently seen past max), else nil when unknown.
// p.mu must be held.
func (p *peers) lookup(key string, create bool) *peer {
	if e, ok := p.byKey[key]; ok {
		p.order.MoveToFront(e)
		return e.Value.(*peer)
	}
	if !create {
		return nil
	}
	if p.order.Len() >= p.max {
		oldest := p.order.Back()
		p.order.Remove(oldest)
		delete(p.byKey, oldest.Value.(*peer).key)
	}
	pr := &peer{key: key}
	p.byKey[key] = p.order.PushFront(pr)
	return pr
}

// over reports whether key has no failure left in its bucket, and how
// long until one is. It takes nothing: a request that then authenticates
// costs its address nothing.
func (p *peers) over(key string, now time.Time) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.lookup(key, false)
	if pr == nil || pr.failures == nil {
		return 0, false
	}
	tokens := pr.failures.TokensAt(now)
	if tokens >= 1 {
		return 0, false
	}
	return time.Duration((1 - tokens) / float64(p.rate) * float64(time.Second)), true
}

// fail takes one failure from key's bucket.
func (p *peers) fail(key string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.lookup(key, true)
	if pr.failures == nil {
		pr.failures = rate.NewLimiter(p.rate, p.burst)
	}
	pr.failures.AllowN(now, 1)
}

// sample says whether a refusal of code index i for key may be logged
// now (and how many were held back since the last one), or counts it as
// held back. global caps the lines over every address.
func (p *peers) sample(key string, i int, now time.Time, global *rate.Limiter) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.lookup(key, true)
	if now.Sub(pr.logged[i]) < refusalLogEvery || !global.AllowN(now, 1) {
		pr.suppressed[i]++
		return 0, false
	}
	n := pr.suppressed[i]
	pr.logged[i], pr.suppressed[i] = now, 0
	return n, true
}

// len is the number of addresses remembered.
func (p *peers) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.order.Len()
}

// peerKey is the address a request is limited and sampled by: its IP,
// and for IPv6 its /64 (one host commonly holds a whole /64, so a
// per-address key would let it rotate freely). Never a header: behind a
// proxy every client shares the proxy's address, and X-Forwarded-For is
// the client's to forge.
func peerKey(remoteAddr string) (key, ip string) {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return remoteAddr, remoteAddr
	}
	addr := ap.Addr().Unmap()
	if addr.Is6() {
		return netip.PrefixFrom(addr, 64).Masked().String(), addr.String()
	}
	return addr.String(), addr.String()
}

// caller is one request's peer, worked out once and only when needed
// (by authed with tokens, by refused), and what observed learns from the
// layers below it: the principal, once authenticated.
type caller struct {
	remote    string // the request's RemoteAddr
	key, ip   string // peerKey(remote), once keyed
	keyed     bool
	principal string
}

// peer is peerKey of the request's address, computed on first use.
func (c *caller) peer() (key, ip string) {
	if !c.keyed {
		c.key, c.ip = peerKey(c.remote)
		c.keyed = true
	}
	return c.key, c.ip
}

type callerKey struct{}

// callerOf is r's caller, as observed made it (a fresh one for a request
// that did not pass observed).
func callerOf(r *http.Request) *caller {
	if c, ok := r.Context().Value(callerKey{}).(*caller); ok {
		return c
	}
	return &caller{remote: r.RemoteAddr}
}

// noteCaller records p's name for observed's refusal line.
func noteCaller(ctx context.Context, principal string) {
	if c, ok := ctx.Value(callerKey{}).(*caller); ok {
		c.principal = principal
	}
}

// observed counts and logs the refusals among one route's answers.
func (s *Server) observed(surface string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &caller{remote: r.RemoteAddr}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
		if i := refusalIndex(sw.status); i >= 0 {
			s.refused(r, surface, i, c)
		}
	})
}

// refused counts a refusal and logs it, sampled: at most one line per
// remote address and code every refusalLogEvery (the next line says how
// many were held back), and refusalLogRate lines a second over all
// addresses. The counter sees every one. The line never holds a header
// (the token is in one) nor the query string.
func (s *Server) refused(r *http.Request, surface string, i int, c *caller) {
	status := refusalCodes[i]
	if s.o.Observer != nil {
		s.o.Observer.Refused(surface, status)
	}
	key, ip := c.peer()
	principal := c.principal
	held, ok := s.peers.sample(key, i, s.now(), s.logLimit)
	if !ok {
		return
	}
	path := r.URL.Path
	if len(path) > maxLoggedPath {
		path = path[:maxLoggedPath] + "…"
	}
	attrs := []slog.Attr{slog.Int("status", status), slog.String("surface", surface), slog.String("remote", ip),
		slog.String("method", r.Method), slog.String("path", path)}
	if principal != "" {
		attrs = append(attrs, slog.String("principal", principal))
	}
	if held > 0 {
		attrs = append(attrs, slog.Int("suppressed", held))
	}
	s.o.Log.LogAttrs(r.Context(), slog.LevelWarn, "request refused", attrs...)
}

// retryAfter is a wait in whole seconds, at least 1, for Retry-After.
func retryAfter(wait time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(wait.Seconds()))))
}
