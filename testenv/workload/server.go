// Package workload is the HTTP server testenv's pods run (binary
// testenv/cmd/dwserver, image name "dwserver"), in the shutdown styles the
// seeds measure:
//
//   - naive: at SIGTERM, http.Server.Shutdown at once: the listener closes
//     immediately and in-flight requests finish (a framework's default).
//     Exit code 0.
//   - protocol: at SIGTERM, /ready answers 503 and keep-alives are turned
//     off, the server keeps accepting for DrainDelay, then Shutdown with
//     ShutdownTimeout. Exit code 0.
//   - ignore-term: the binary re-execs itself as `/bin/sh -c '<self>
//     --mode=naive ... & wait'`. The shell is PID 1 of the container and has
//     no SIGTERM handler, so the kernel drops SIGTERM and only SIGKILL ends
//     it (exit 137): the real-world shape of a shell entrypoint.
//   - h2c: protocol's stop behaviour over HTTP/2 without TLS
//     (golang.org/x/net/http2 and h2c; prior knowledge or Upgrade). At
//     Shutdown every HTTP/2 connection gets a GOAWAY, open streams finish,
//     and Run waits for the connections to end (at most ShutdownTimeout).
//   - grpc: the standard gRPC health service (see grpc.go) with
//     GracefulStop after DrainDelay, bounded by ShutdownTimeout.
//   - no-handler: naive's server with no signal handling at all (no
//     signal.Notify): the Go runtime's default action ends it at the stop
//     signal, whatever it is serving. As PID 1 of its container the
//     kernel drops the runtime's re-raise of SIGTERM and the runtime exits
//     with status 2; otherwise it dies of SIGTERM (143).
//   - shutdown-short: protocol's drain, then Shutdown bounded by
//     ShutdownTimeout; when the timeout expires first, Run returns the
//     error without closing the connections (seed 003's pattern): the
//     process exits 1 and its exit tears down the requests still running.
//
// naive and protocol are both "net/http Server.Shutdown after a drain
// delay": naive's delay is zero, protocol's is DrainDelay. IgnoreStop
// (--ignore-stop) makes any mode ignore its stop signals in-process, so only
// SIGKILL ends it and cuts what is in flight.
//
// Routes: /work (WorkDuration, 20 ms), /slow?ms=N (default 2000; the
// response is written after N ms), /ready (200, or 503 once draining),
// /healthz (200, or 500 from UnhealthyAfter on), /alloc?mb=N (allocates,
// touches and keeps N MiB: a leak on demand, for a memory limit's OOM kill);
// with ResetFor every request is answered by a reset for that long after
// the traffic port opens. Every lifecycle event is logged to stderr as one
// JSON line with an RFC 3339 nanosecond timestamp.
//
// Real third-party servers run as workloads too: Nginx, HAProxy and
// PythonHTTP write their config into a directory and return the argv of
// Debian's binary.
package workload

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Modes.
const (
	ModeNaive      = "naive"
	ModeProtocol   = "protocol"
	ModeIgnoreTerm = "ignore-term"
	ModeH2C        = "h2c"
	ModeGRPC       = "grpc"
	ModeNoHandler  = "no-handler"
	// ModeShutdownShort: see the package comment.
	ModeShutdownShort = "shutdown-short"
)

// Config is the server's behaviour.
type Config struct {
	Mode            string
	Addr            string // ":8080"
	DrainDelay      time.Duration
	ShutdownTimeout time.Duration
	WorkDuration    time.Duration
	LogRequests     bool
	// IgnoreStop: Run never reads its stop channel; the process (see
	// dwserver) ignores its stop signals and only SIGKILL ends it.
	IgnoreStop bool
	// EndStreams (grpc): at the stop signal, open Watch streams end with
	// status OK instead of running until GracefulStop's timeout.
	EndStreams bool
	// IdleTimeout closes a kept-alive connection idle this long (net/http's
	// IdleTimeout; zero keeps it open until the client closes it). A proxy
	// whose pool keeps connections longer meets the keep-alive race.
	IdleTimeout time.Duration
	// UnhealthyAfter makes /healthz answer 500 this long after the server
	// started (zero: never), as a server whose dependency stalls does: a
	// liveness probe on /healthz then has the kubelet restart it.
	UnhealthyAfter time.Duration
	// HealthAddr, when set, is a listener that opens at once and accepts
	// (and closes) connections: a tcpSocket readiness probe's target. With
	// ListenAfter, the traffic port (Addr) listens only that long after
	// the start: a readiness probe on HealthAddr passes before the server
	// serves (the startup side's ready_before_listening).
	HealthAddr  string
	ListenAfter time.Duration
	// ResetFor: for this long after the traffic port opens, the server
	// reads each request and resets its connection (SO_LINGER 0, then
	// close) instead of answering, as a server still warming up (caches,
	// dependencies) that drops what comes in; with a readiness probe on
	// HealthAddr the pod is Ready meanwhile (the startup side's
	// reset_after_ready).
	ResetFor time.Duration
}

// Server is one workload server.
type Server struct {
	cfg      Config
	log      zerolog.Logger
	draining atomic.Bool
	stopping chan struct{} // closed at the stop signal
	http     *http.Server
	h2conns  sync.WaitGroup // HTTP/2 connections being served (h2c)
	started  time.Time
	heldMu   sync.Mutex
	held     [][]byte // /alloc's memory, kept until the process ends
	// listening is when the traffic port opened (ResetFor counts from it).
	listening atomic.Int64
}

// New returns a server; Run starts it.
func New(cfg Config, log zerolog.Logger) *Server {
	s := &Server{cfg: cfg, log: log, stopping: make(chan struct{}), started: time.Now()}
	s.http = &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: cfg.IdleTimeout}
	if cfg.ResetFor > 0 {
		s.http.Handler = s.resetWhileWarming(s.http.Handler)
	}
	if cfg.Mode == ModeH2C {
		s.http.Handler = s.h2c(s.http.Handler)
	}
	return s
}

// resetWhileWarming resets the connection of every request that arrives
// within ResetFor of the traffic port's opening.
func (s *Server) resetWhileWarming(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		since := time.Since(time.Unix(0, s.listening.Load()))
		hj, ok := w.(http.Hijacker)
		if since >= s.cfg.ResetFor || !ok {
			next.ServeHTTP(w, r)
			return
		}
		c, _, err := hj.Hijack()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // close sends a RST
		}
		_ = c.Close()
		if s.cfg.LogRequests {
			s.log.Debug().Str("event", "reset").Str("path", r.URL.Path).Str("remote", r.RemoteAddr).Dur("since_listening", since).Msg("warming up: connection reset")
		}
	})
}

// Run listens, serves, and on a value from stop (SIGTERM) shuts down as the
// mode says. It returns once the server has stopped.
func (s *Server) Run(ctx context.Context, stop <-chan os.Signal) error {
	if err := s.serveHealth(); err != nil {
		return err
	}
	time.Sleep(s.cfg.ListenAfter)
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.cfg.Addr, err)
	}
	s.listening.Store(time.Now().UnixNano())
	s.log.Info().Str("event", "listening").Str("addr", ln.Addr().String()).Str("mode", s.cfg.Mode).Dur("reset_for", s.cfg.ResetFor).Msg("serving")
	if s.cfg.IgnoreStop {
		stop = nil // a nil channel never delivers: only SIGKILL (or ctx) ends the server
	}
	if s.cfg.Mode == ModeGRPC {
		return s.runGRPC(ctx, ln, stop)
	}
	served := make(chan error, 1)
	go func() { served <- s.http.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
		return s.shutdown()
	case sig := <-stop:
		s.log.Info().Str("event", "signal").Str("signal", sig.String()).Msg("stop signal received")
	}
	close(s.stopping)
	if s.cfg.Mode != ModeNaive {
		s.drain()
	}
	if err := s.shutdown(); err != nil {
		return err
	}
	if s.cfg.Mode == ModeH2C {
		if err := s.waitH2Conns(); err != nil {
			return err
		}
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", err)
	}
	return nil
}

// drain fails readiness and keeps serving for DrainDelay, with keep-alives
// off so pooled clients reconnect (to another endpoint once routing has
// converged).
func (s *Server) drain() {
	s.draining.Store(true)
	s.http.SetKeepAlivesEnabled(false)
	s.log.Info().Str("event", "not_ready").Dur("drain_delay", s.cfg.DrainDelay).Msg("readiness now 503, still serving")
	time.Sleep(s.cfg.DrainDelay)
}

// shutdown closes the listener and waits for in-flight requests, at most
// ShutdownTimeout; past it, remaining connections are closed.
func (s *Server) shutdown() error {
	s.log.Info().Str("event", "shutdown_begin").Msg("closing listener, finishing in-flight requests")
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := s.http.Shutdown(ctx); err != nil {
		if s.cfg.Mode == ModeShutdownShort {
			s.log.Warn().Str("event", "shutdown_timeout").Err(err).Msg("exiting with requests in flight")
			return fmt.Errorf("shutdown: %w", err)
		}
		_ = s.http.Close()
		s.log.Warn().Str("event", "shutdown_timeout").Err(err).Msg("in-flight requests cut")
		return fmt.Errorf("shutdown: %w", err)
	}
	s.log.Info().Str("event", "shutdown_done").Msg("all requests finished")
	return nil
}

// serveHealth opens HealthAddr, if set, and accepts and closes its
// connections until the process ends.
func (s *Server) serveHealth() error {
	if s.cfg.HealthAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.HealthAddr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.cfg.HealthAddr, err)
	}
	s.log.Info().Str("event", "health_listening").Str("addr", ln.Addr().String()).Dur("listen_after", s.cfg.ListenAfter).Msg("health port open")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return nil
}
