package main

import (
	"context"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/exporter"
)

// servePprof serves Go's runtime profiles (/debug/pprof/) on addr until ctx
// is done: off by default, and on its own listener so that the profiles,
// which show the process's internals, never share the metrics port nor
// its authentication. A failure is logged and the daemon runs on.
func servePprof(ctx context.Context, addr string, log zerolog.Logger) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error().Err(err).Str("addr", addr).Msg("--pprof-addr: not serving profiles")
		return
	}
	log.Info().Str("addr", l.Addr().String()).Msg("serving Go profiles at /debug/pprof/")
	go func() {
		if err := exporter.ServeUntil(ctx, pprofHandler(), l); err != nil {
			log.Error().Err(err).Msg("serving Go profiles")
		}
	}()
}

// pprofHandler serves net/http/pprof's pages (its own mux: the package
// registers on http.DefaultServeMux, which nothing here serves).
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
