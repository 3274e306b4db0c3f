package workload

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// DefaultSlow is /slow's duration without ?ms=.
const DefaultSlow = 2 * time.Second

// maxSlow bounds /slow so no request outlives a test by much.
const maxSlow = 5 * time.Minute

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/work", s.timed(func(*http.Request) (time.Duration, error) { return s.cfg.WorkDuration, nil }))
	mux.HandleFunc("/slow", s.timed(slowDuration))
	mux.HandleFunc("/ready", s.ready)
	mux.HandleFunc("/healthz", s.healthz)
	mux.HandleFunc("/alloc", s.alloc)
	return mux
}

// timed answers after the duration d returns, unless the client goes away.
func (s *Server) timed(d func(*http.Request) (time.Duration, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		dur, err := d(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		start := time.Now()
		select {
		case <-time.After(dur):
		case <-r.Context().Done():
			return
		}
		if s.cfg.LogRequests {
			s.log.Debug().Str("event", "request").Str("path", r.URL.Path).Str("remote", r.RemoteAddr).
				Dur("took", time.Since(start)).Msg("served")
		}
		fmt.Fprintf(w, "ok %s %s\n", r.URL.Path, dur)
	}
}

func slowDuration(r *http.Request) (time.Duration, error) {
	q := r.URL.Query().Get("ms")
	if q == "" {
		return DefaultSlow, nil
	}
	ms, err := strconv.Atoi(q)
	if err != nil || ms < 0 || time.Duration(ms)*time.Millisecond > maxSlow {
		return 0, fmt.Errorf("ms=%q: want an integer from 0 to %d", q, maxSlow.Milliseconds())
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func (s *Server) ready(w http.ResponseWriter, _ *http.Request) {
	if s.draining.Load() {
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
}

// healthz answers 200, or 500 once UnhealthyAfter has passed.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	if after := s.cfg.UnhealthyAfter; after > 0 && time.Since(s.started) >= after {
		http.Error(w, "unhealthy", http.StatusInternalServerError)
		return
	}
	fmt.Fprintln(w, "ok")
}

// maxAlloc bounds one /alloc.
const maxAlloc = 1024

// alloc allocates ?mb= MiB, touches every page and keeps it: under a
// memory limit the kernel's OOM killer ends the process before it answers.
func (s *Server) alloc(w http.ResponseWriter, r *http.Request) {
	mb, err := strconv.Atoi(r.URL.Query().Get("mb"))
	if err != nil || mb <= 0 || mb > maxAlloc {
		http.Error(w, fmt.Sprintf("mb=%q: want an integer from 1 to %d", r.URL.Query().Get("mb"), maxAlloc), http.StatusBadRequest)
		return
	}
	b := make([]byte, mb<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	s.heldMu.Lock()
	s.held = append(s.held, b)
	s.heldMu.Unlock()
	fmt.Fprintf(w, "holding %d MiB more\n", mb)
}
