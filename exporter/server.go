package exporter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/correlate"
)

// ServerConfig wires the daemon's HTTP server.
type ServerConfig struct {
	Source TerminationSource
	// Startups serves /api/v1/startups; nil serves an empty list.
	Startups StartupSource
	Metrics  *Metrics
	// Ready returns nil once the daemon serves correct data (informers
	// synced, probes attached); /readyz reports its error otherwise. Nil
	// means always ready.
	Ready func() error
	// Healthy returns nil while the daemon works; /healthz reports its
	// error otherwise (a stopped kernel reader, a stuck loop, API watches
	// failing for minutes). Nil means always healthy.
	Healthy func() error
	Log     zerolog.Logger
	// Now is time.Now when nil.
	Now func() time.Time
	// Limits bound the server; zero fields are DefaultLimits'.
	Limits Limits
}

// Server serves /metrics, /api/v1/terminations, /ui, /healthz and /readyz.
type Server struct {
	source   TerminationSource
	startups StartupSource
	metrics  *Metrics
	ready    func() error
	healthy  func() error
	log      zerolog.Logger
	now      func() time.Time
	limits   Limits
	mux      *http.ServeMux
}

// NewServer builds the server's routes.
func NewServer(cfg ServerConfig) *Server {
	s := &Server{source: cfg.Source, metrics: cfg.Metrics, ready: cfg.Ready, healthy: cfg.Healthy, log: cfg.Log, now: cfg.Now,
		limits: cfg.Limits.withDefaults(), mux: http.NewServeMux()}
	if s.now == nil {
		s.now = time.Now
	}
	if s.ready == nil {
		s.ready = func() error { return nil }
	}
	if s.healthy == nil {
		s.healthy = func() error { return nil }
	}
	if s.source == nil {
		s.source = noTerminations{}
	}
	s.startups = cfg.Startups
	if s.startups == nil {
		s.startups = noStartups{}
	}
	if s.metrics != nil {
		s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.Registry(), promhttp.HandlerOpts{ErrorLog: promLogger{s.log}}))
	}
	lists := newListGate(s.limits.Lists, s.countThrottled)
	s.mux.HandleFunc("GET /api/v1/terminations", lists.wrap(s.listTerminations))
	s.mux.HandleFunc("GET /api/v1/terminations/{uid}", s.getTermination)
	s.mux.HandleFunc("GET /api/v1/startups", lists.wrap(s.listStartups))
	s.mux.HandleFunc("GET /ui", lists.wrap(s.timelinePage))
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	// A relative redirect, so that it also works through the pod proxy.
	s.mux.Handle("GET /{$}", http.RedirectHandler("ui", http.StatusFound))
	return s
}

// Handler is the server's root handler (tests mount it on httptest).
func (s *Server) Handler() http.Handler { return ReadOnly(s.mux) }

// Limits are the server's limits, DefaultLimits where its configuration
// left them zero.
func (s *Server) Limits() Limits { return s.limits }

// countThrottled counts a list request answered 429.
func (s *Server) countThrottled() {
	if s.metrics != nil {
		s.metrics.self.throttled.Inc()
	}
}

// Serve serves on l until ctx is done, then shuts down within 5 s.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	return ServeUntil(ctx, s.Handler(), l, s.limits)
}

// ServeUntil serves h on l with lim's timeouts and header limit until ctx
// is done, then shuts down within 5 s; an error is the server's own (not
// the shutdown it was asked for).
func ServeUntil(ctx context.Context, h http.Handler, l net.Listener, lim Limits) error {
	srv := lim.withDefaults().server(h)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving HTTP on %s: %w", l.Addr(), err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutting down HTTP server: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving HTTP on %s: %w", l.Addr(), err)
	}
	return nil
}

// ListenAndServe listens on addr (":9090") and serves until ctx is done.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	s.log.Info().Str("addr", l.Addr().String()).Msg("serving metrics, API and UI")
	return s.Serve(ctx, l)
}

// promLogger routes promhttp's errors to zerolog.
type promLogger struct{ log zerolog.Logger }

func (p promLogger) Println(v ...any) { p.log.Error().Msg(fmt.Sprint(v...)) }

// noTerminations is the source of a server configured without one.
type noTerminations struct{}

func (noTerminations) Terminations() []correlate.Termination { return nil }

func (noTerminations) Get(string) (correlate.Termination, bool) {
	return correlate.Termination{}, false
}
