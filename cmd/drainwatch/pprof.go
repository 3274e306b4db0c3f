package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"runtime"
	"time"

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
		if err := exporter.ServeUntil(ctx, pprofHandler(), l, pprofLimits); err != nil {
			log.Error().Err(err).Msg("serving Go profiles")
		}
	}()
}

// checkPprofAddr refuses a --pprof-addr that is not a loopback address: the
// profiles are served without authentication and show the process's
// memory (heap contents, command line), so they must not be reachable from
// the pod network. Only IP literals count: a name such as localhost is
// whatever the node's resolver says it is.
func checkPprofAddr(addr string) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--pprof-addr %q: want HOST:PORT with a loopback HOST (127.0.0.1:6060): %w", addr, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.Unmap().IsLoopback() || ip.Zone() != "" {
		return fmt.Errorf("--pprof-addr %q: the profiles are served without authentication, so only a loopback IP is accepted (127.0.0.1:6060 or [::1]:6060; reach it with kubectl port-forward)", addr)
	}
	return nil
}

// pprofLimits are the daemon's but for the write timeout: a CPU profile
// or an execution trace answers after the seconds it was asked to record
// (30 by default), and net/http/pprof refuses any that would outlast the
// write timeout. /debug/pprof/symbol takes a POST body, so it is not
// exporter.ReadOnly.
var pprofLimits = func() exporter.Limits {
	l := exporter.DefaultLimits
	l.Write = 5 * time.Minute
	return l
}()

// sampleHeap keeps the runtime's heap-profile sampling (one sample per
// 512 KiB allocated, each stack kept for the process's life in a 1.4 MiB
// hash table that fills as distinct stacks are sampled) only when
// --pprof-addr serves the profile: nothing else reads it. The saving grows
// with uptime; 70 s after start it is within make bench's noise (±0.5 MiB
// of anonymous memory). Allocations before main (package init) are
// sampled either way.
func sampleHeap(pprofAddr string) {
	if pprofAddr == "" {
		runtime.MemProfileRate = 0
	}
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
