package promtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// PrometheusBin is Debian's Prometheus server.
const PrometheusBin = "/usr/bin/prometheus"

// Server is a Prometheus server scraping Targets every ScrapeInterval,
// listening on 127.0.0.1 only. Its data and log live in a test temp dir.
type Server struct {
	URL string
	cmd *exec.Cmd
	log string
}

// ScrapeInterval is short so a test sees a counter within seconds.
const ScrapeInterval = time.Second

// Start runs Prometheus scraping targets ("127.0.0.1:port", path /metrics)
// under job "drainwatch", waits until it is ready, and stops it when the
// test ends.
func Start(t testing.TB, targets ...string) *Server {
	t.Helper()
	return StartWithRules(t, nil, targets...)
}

// StartWithRules is Start with rule files loaded (alerting and recording
// rules, evaluated every ScrapeInterval; firing alerts show in ALERTS).
func StartWithRules(t testing.TB, ruleFiles []string, targets ...string) *Server {
	t.Helper()
	privileged.RequireFile(t, PrometheusBin, "Debian's prometheus package (make deps)")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(config(targets, ruleFiles)), 0o644); err != nil {
		t.Fatal(err)
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{URL: "http://" + addr, log: filepath.Join(dir, "prometheus.log")}
	if err := s.start(dir, cfg, addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.waitReady(ctx); err != nil {
		t.Fatalf("%v\n%s", err, s.Log())
	}
	return s
}

func config(targets, ruleFiles []string) string {
	return fmt.Sprintf(`global:
  scrape_interval: %s
  evaluation_interval: %s
rule_files: [%s]
scrape_configs:
  - job_name: drainwatch
    static_configs:
      - targets: [%s]
`, ScrapeInterval, ScrapeInterval, quoteAll(ruleFiles), quoteAll(targets))
}

func quoteAll(ss []string) string {
	quoted := make([]string, len(ss))
	for i, s := range ss {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(quoted, ", ")
}

func (s *Server) start(dir, cfg, addr string) error {
	out, err := os.Create(s.log)
	if err != nil {
		return fmt.Errorf("creating the Prometheus log: %w", err)
	}
	s.cmd = exec.Command(PrometheusBin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--storage.tsdb.retention.time=1h")
	s.cmd.Stdout, s.cmd.Stderr = out, out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("starting %s: %w", PrometheusBin, err)
	}
	go func() { _ = s.cmd.Wait(); out.Close() }()
	return nil
}

func (s *Server) stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _, _ = s.cmd.Process.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
		}
	}
}

// Log returns what Prometheus printed (for failure messages).
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}

func (s *Server) waitReady(ctx context.Context) error {
	for {
		resp, err := http.Get(s.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("prometheus at %s not ready: %w", s.URL, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
