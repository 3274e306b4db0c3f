package workload

import (
	"fmt"
	"os"
	"path/filepath"
)

// HAProxyPath is Debian's haproxy. Its image says STOPSIGNAL SIGUSR1: soft
// stop (listeners close, open connections finish, then it exits).
const HAProxyPath = "/usr/sbin/haproxy"

// HAProxy is a Debian haproxy in front of one backend server (a dwserver
// beside it in the same network namespace): /work is answered by haproxy
// itself (http-request return), everything else (/slow?ms=N) goes to the
// backend. No master-worker, no daemon, no stats.
type HAProxy struct {
	Dir     string // config and pid file
	Addr    string // frontend bind address: "127.0.0.1:8080" or ":8080"
	Backend string // the backend server: "127.0.0.1:8081"
}

// Write writes the config into Dir and returns haproxy's argv.
func (h HAProxy) Write() ([]string, error) {
	if err := os.MkdirAll(h.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("haproxy dir: %w", err)
	}
	conf := filepath.Join(h.Dir, "haproxy.cfg")
	if err := os.WriteFile(conf, []byte(h.config()), 0o644); err != nil {
		return nil, fmt.Errorf("haproxy config: %w", err)
	}
	// -db: stay in the foreground, the container's process.
	return []string{HAProxyPath, "-db", "-f", conf, "-p", filepath.Join(h.Dir, "haproxy.pid")}, nil
}

func (h HAProxy) config() string {
	return fmt.Sprintf(`global
  maxconn 256

defaults
  mode http
  timeout connect 2s
  timeout client 5m
  timeout server 5m

frontend web
  bind %s
  http-request return status 200 content-type text/plain string "ok /work\n" if { path /work }
  default_backend app

backend app
  server app %s
`, h.Addr, h.Backend)
}
