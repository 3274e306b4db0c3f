package workload

import (
	"fmt"
	"os"
	"path/filepath"
)

// NginxPath is Debian's nginx. Its image config says STOPSIGNAL SIGQUIT:
// graceful stop (the master and its worker close their listeners, finish
// open requests, exit).
const NginxPath = "/usr/sbin/nginx"

// Nginx is a Debian nginx serving /work at once and /slow for about Slow:
// /slow is a generated file sent at limit_rate Rate. nginx lets the first
// second's worth go at once and counts in whole seconds, so the file is
// Rate×(Slow+1 s) bytes and /slow lasts Slow to within about a second.
type Nginx struct {
	Dir  string // config, pid, logs, temp files and slow.bin; nginx touches nothing else
	Addr string // listen address: "127.0.0.1:8080" or "8080"
	Slow int    // /slow's duration in milliseconds
	Rate int    // bytes per second of /slow; 65536 when zero
}

// Write writes the config and /slow's file into Dir and returns nginx's argv.
func (n Nginx) Write() ([]string, error) {
	if n.Rate == 0 {
		n.Rate = 64 << 10
	}
	if err := os.MkdirAll(filepath.Join(n.Dir, "tmp"), 0o755); err != nil {
		return nil, fmt.Errorf("nginx dir: %w", err)
	}
	slow := make([]byte, n.Rate*(n.Slow+1000)/1000)
	if err := os.WriteFile(filepath.Join(n.Dir, "slow.bin"), slow, 0o644); err != nil {
		return nil, fmt.Errorf("nginx /slow file: %w", err)
	}
	conf := filepath.Join(n.Dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(n.config()), 0o644); err != nil {
		return nil, fmt.Errorf("nginx config: %w", err)
	}
	// -e: the error log nginx opens before reading the config, which is
	// /var/log/nginx/error.log otherwise.
	return []string{NginxPath, "-p", n.Dir, "-e", filepath.Join(n.Dir, "error.log"), "-c", conf}, nil
}

func (n Nginx) config() string {
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;\n" // the worker reads slow.bin in Dir, which may be private to root
	}
	t := filepath.Join(n.Dir, "tmp")
	return fmt.Sprintf(`%sdaemon off;
worker_processes 1;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log;
events { worker_connections 128; }
http {
  access_log off;
  sendfile off;
  default_type application/octet-stream;
  client_body_temp_path %[3]s/body;
  proxy_temp_path %[3]s/proxy;
  fastcgi_temp_path %[3]s/fastcgi;
  uwsgi_temp_path %[3]s/uwsgi;
  scgi_temp_path %[3]s/scgi;
  server {
    listen %[4]s;
    location = /work { return 200 "ok /work\n"; }
    location = /slow { limit_rate %[5]d; alias %[2]s/slow.bin; }
  }
}
`, user, n.Dir, t, n.Addr, n.Rate)
}
