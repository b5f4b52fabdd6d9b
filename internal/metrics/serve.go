package metrics

import (
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pg-cdc/pg-cdc/internal/access"
)

// Serve holds the collectors of pg-cdc serve (docs/metrics.md, "serve").
// It implements serve.Observer. Labels are bounded: surface is rest, sse,
// mcp (or metrics, for refusals); code an HTTP status class, or for
// refusals one of five statuses; principal a configured token's name,
// never a remote address.
type Serve struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	rateLimited *prometheus.CounterVec
	refusals    *prometheus.CounterVec
	inFlight    prometheus.Gauge
}

// NewServe registers the serve collectors on reg.
func NewServe(reg prometheus.Registerer) *Serve {
	f := factory{reg}
	d := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "serve_request_duration_seconds",
		Help: "Time to answer a request to a surface (REST, MCP), by surface.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)},
		[]string{"surface"})
	reg.MustRegister(d)
	s := &Serve{
		requests:    f.counterVec("serve_requests_total", "Requests answered by a surface, by surface and status class (2xx, 4xx, 5xx).", "surface", "code"),
		duration:    d,
		rateLimited: f.counterVec("serve_rate_limited_total", "Requests refused with 429 because their principal was over its rate limit.", "principal"),
		refusals: f.counterVec("serve_refusals_total",
			"Requests turned away, by surface and status: 401 (no valid token), 403 (MCP host or origin), 413 (body too large), 429 (a rate limit, per principal or per address), 503 (busy).", "surface", "code"),
		inFlight: f.gauge("serve_in_flight_requests", "Requests to the surfaces running now (bounded by serve.max_concurrent)."),
	}
	// The series of serve_refusals_total start at zero, so that
	// increase() sees the first refusal: every label value serve counts
	// by (access's one list; metrics does not import serve, which declares
	// the Observer this implements).
	for _, surface := range access.RefusalSurfaces {
		for _, code := range access.RefusalCodes {
			s.refusals.WithLabelValues(surface, strconv.Itoa(code))
		}
	}
	return s
}

// NewServeEndpoint is pg-cdc serve's registry: the serve collectors, the
// build info and the Go runtime's, and the /metrics handler serving them.
func NewServeEndpoint(version string) (*Serve, http.Handler) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := factory{reg}
	f.gaugeVec("build_info", "Always 1: the version of pg-cdc and of Go that built it.", "version", "goversion").
		WithLabelValues(version, runtime.Version()).Set(1)
	return NewServe(reg), promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// Request counts one answered request.
func (s *Serve) Request(surface string, status int, d time.Duration) {
	s.requests.WithLabelValues(surface, strconv.Itoa(status/100)+"xx").Inc()
	s.duration.WithLabelValues(surface).Observe(d.Seconds())
}

// RateLimited counts a request refused for its principal's rate.
func (s *Serve) RateLimited(principal string) { s.rateLimited.WithLabelValues(principal).Inc() }

// Refused counts a refusal: status is one of the five refusal codes.
func (s *Serve) Refused(surface string, status int) {
	s.refusals.WithLabelValues(surface, strconv.Itoa(status)).Inc()
}

// InFlight moves the running-requests gauge.
func (s *Serve) InFlight(delta int) { s.inFlight.Add(float64(delta)) }
