// Package server is pg-cdc's HTTP transport: /metrics (Prometheus), /livez
// and /readyz. It holds no logic of its own: metrics come from the injected
// gatherer, health from health.Tracker.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pg-cdc/pg-cdc/internal/health"
)

// Handler serves the endpoints.
//
//	/metrics  Prometheus text (or OpenMetrics) from g
//	/livez    200 while the replication loop turns, else 503
//	/readyz   200 while a session streams with bounded lag, else 503
//
// Both health endpoints answer with the tracker's status as JSON, so the
// reason for a 503 is one curl away.
func Handler(g prometheus.Gatherer, h *health.Tracker) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		s := h.Status()
		writeStatus(w, s, s.Alive)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		s := h.Status()
		writeStatus(w, s, s.Ready)
	})
	return mux
}

func writeStatus(w http.ResponseWriter, s health.Status, ok bool) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(s) // a client that went away is not our error
}

// Listen binds addr (host:port; port 0 picks a free one) now, so that a
// taken port fails the command at start rather than later.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for metrics on %s: %w", addr, err)
	}
	return ln, nil
}

// Serve serves h on ln until ctx is done, then shuts down within a second.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      30 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("metrics server: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics server: %w", err)
	}
	return nil
}
