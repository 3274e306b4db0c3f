package l7

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// nginxPath is Debian's nginx.
const nginxPath = "/usr/sbin/nginx"

// nginx runs Debian's nginx in the foreground, one worker, its access log
// (with $upstream_addr and $upstream_status) and error log in Dir. A new
// backend set is a rewritten upstream block and a reload.
type nginx struct {
	cfg  Config
	addr string

	mu      sync.Mutex
	cmd     *exec.Cmd
	reloads int // reloads sent: the new worker of reload k is worker k+1
}

func (n *nginx) conf() string      { return filepath.Join(n.cfg.Dir, "nginx.conf") }
func (n *nginx) errorLog() string  { return filepath.Join(n.cfg.Dir, "error.log") }
func (n *nginx) accessLog() string { return filepath.Join(n.cfg.Dir, "access.log") }

func (n *nginx) start(initial []string) (*exec.Cmd, error) {
	if err := os.MkdirAll(filepath.Join(n.cfg.Dir, "tmp"), 0o755); err != nil {
		return nil, fmt.Errorf("nginx temp dir: %w", err)
	}
	if err := os.WriteFile(n.conf(), []byte(n.config(initial)), 0o644); err != nil {
		return nil, fmt.Errorf("nginx config: %w", err)
	}
	// -e: the error log nginx opens before reading the config.
	cmd, err := startIn(n.cfg.NetNS, n.cfg.Dir, "nginx",
		[]string{nginxPath, "-p", n.cfg.Dir, "-e", n.errorLog(), "-c", n.conf()})
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.cmd = cmd
	n.mu.Unlock()
	return cmd, nil
}

// apply rewrites the config and reloads: SIGHUP to the master, what `nginx
// -s reload` sends. It returns once the new worker has started and the old
// one has exited (the master logs both at notice level): until then the old
// worker still serves requests arriving on its client connections, with
// the old upstream list and its own pool (seen: a request sent to the
// removed pod after the new worker started).
func (n *nginx) apply(backends []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := os.WriteFile(n.conf(), []byte(n.config(backends)), 0o644); err != nil {
		return fmt.Errorf("nginx config: %w", err)
	}
	if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		return fmt.Errorf("nginx reload: %w", err)
	}
	n.reloads++
	return n.waitWorkers(n.reloads+1, n.reloads)
}

// workerExited is the master's notice that a worker is gone.
var workerExited = regexp.MustCompile(`worker process \d+ exited`)

// waitWorkers waits up to 10 s until the error log shows started worker
// starts and exited worker exits (one worker per generation).
func (n *nginx) waitWorkers(started, exited int) error {
	for deadline := time.Now().Add(10 * time.Second); ; {
		b, err := os.ReadFile(n.errorLog())
		if err != nil {
			return fmt.Errorf("nginx error log: %w", err)
		}
		if strings.Count(string(b), "start worker process ") >= started && len(workerExited.FindAll(b, -1)) >= exited {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nginx: reload %d: the new worker did not start or the old one did not exit in 10 s (see %s)",
				started-1, n.errorLog())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop is nginx's graceful stop (SIGQUIT): workers finish their requests
// and the logs are complete when it exits.
func (n *nginx) stop(cmd *exec.Cmd) error { return cmd.Process.Signal(syscall.SIGQUIT) }

func (n *nginx) counts() (Counts, error) { return parseNginxLogs(n.accessLog(), n.errorLog()) }

// config: the upstream block holds the ready endpoints and the keep-alive
// pool (HTTP/1.1 and an empty Connection header, or nginx closes upstream
// connections after each request). With no endpoint the location answers
// 503, as ingress-nginx does for a Service without endpoints.
func (n *nginx) config(backends []string) string {
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;\n" // the worker writes temp files in Dir, which may be private to root
	}
	var servers strings.Builder
	for _, b := range backends {
		// max_fails=0 as ingress-nginx configures its upstreams: nginx's
		// passive health check would otherwise disable a server for 10 s
		// after one reset on a reused connection and answer the next
		// requests 502 without trying it (no live upstreams).
		fmt.Fprintf(&servers, "    server %s max_fails=0;\n", b)
	}
	location := "return 503;"
	if len(backends) == 0 {
		servers.WriteString("    server 127.0.0.1:1 down;\n") // an upstream needs a server
	} else {
		location = "proxy_pass http://be;"
	}
	next := "error timeout"
	if n.cfg.Retry == RetryNone {
		next = "off"
	}
	t := filepath.Join(n.cfg.Dir, "tmp")
	return fmt.Sprintf(`%sdaemon off;
worker_processes 1;
pid %[2]s/nginx.pid;
error_log %[3]s notice;
events { worker_connections 512; }
http {
  log_format l7 'l7req $remote_addr:$remote_port $status "$upstream_addr" "$upstream_status" "$request"';
  access_log %[4]s l7;
  client_body_temp_path %[5]s/body;
  proxy_temp_path %[5]s/proxy;
  fastcgi_temp_path %[5]s/fastcgi;
  uwsgi_temp_path %[5]s/uwsgi;
  scgi_temp_path %[5]s/scgi;
  upstream be {
%[6]s    keepalive 32;
    keepalive_timeout %[7]dms;
    keepalive_requests 100000;
  }
  server {
    listen %[8]s;
    keepalive_timeout 30s;
    location / {
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_connect_timeout 1s;
      proxy_next_upstream %[9]s;
      %[10]s
    }
  }
}
`, user, n.cfg.Dir, n.errorLog(), n.accessLog(), t, servers.String(), n.cfg.IdleTimeout.Milliseconds(), n.addr, next, location)
}
