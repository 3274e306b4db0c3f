package exporter

import (
	"fmt"
	"net/http"
)

// healthz is the liveness probe: 503 with the reason when Healthy reports
// the daemon cannot recover by itself (the kubelet then restarts it).
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	if err := s.healthy(); err != nil {
		http.Error(w, "unhealthy: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if err := s.ready(); err != nil {
		http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}
