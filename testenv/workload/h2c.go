package workload

import (
	"fmt"
	"net/http"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
)

// h2c wraps h so the server speaks HTTP/2 without TLS. The h2c handler
// hijacks each HTTP/2 connection and serves it inside the handler call, so
// http.Server.Shutdown forgets it; h2conns counts those calls instead, and
// waitH2Conns waits for them after Shutdown.
func (s *Server) h2c(h http.Handler) http.Handler {
	h2s := &http2.Server{}
	// ConfigureServer makes Shutdown send a GOAWAY on every HTTP/2
	// connection; a connection then ends once its open streams have.
	if err := http2.ConfigureServer(s.http, h2s); err != nil {
		// Only fails on a TLS config, which this server never has.
		panic(fmt.Sprintf("configuring HTTP/2: %v", err))
	}
	inner := h2c.NewHandler(h, h2s)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.h2conns.Add(1)
		defer s.h2conns.Done()
		inner.ServeHTTP(w, r)
	})
}

// waitH2Conns waits, at most ShutdownTimeout, for the HTTP/2 connections
// (and HTTP/1.1 requests) still being served after Shutdown.
func (s *Server) waitH2Conns() error {
	done := make(chan struct{})
	go func() { s.h2conns.Wait(); close(done) }()
	timer := time.NewTimer(s.cfg.ShutdownTimeout)
	defer timer.Stop()
	select {
	case <-done:
		s.log.Info().Str("event", "h2_conns_done").Msg("all HTTP/2 connections ended")
		return nil
	case <-timer.C:
		s.log.Warn().Str("event", "shutdown_timeout").Msg("HTTP/2 streams cut")
		return fmt.Errorf("shutdown: HTTP/2 connections still open after %s", s.cfg.ShutdownTimeout)
	}
}
