package promtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// Server is a running Prometheus (Launch, Start) listening on 127.0.0.1
// only; URL is its base URL, LogFile what it prints.
type Server struct {
	URL      string
	LogFile  string
	interval time.Duration
	cmd      *exec.Cmd
	done     chan struct{} // closed once the process has exited
}

// Start runs Prometheus scraping targets ("127.0.0.1:port", path /metrics)
// under job "drainwatch" every ScrapeInterval, waits until it is ready, and
// stops it when the test ends.
func Start(t testing.TB, targets ...string) *Server {
	t.Helper()
	return StartWithRules(t, nil, targets...)
}

// StartWithRules is Start with rule files loaded (alerting and recording
// rules, evaluated every ScrapeInterval; firing alerts show in ALERTS).
func StartWithRules(t testing.TB, ruleFiles []string, targets ...string) *Server {
	t.Helper()
	privileged.RequireFile(t, PrometheusBin, "Debian's prometheus package (make deps)")
	s, err := Launch(context.Background(), Options{Dir: t.TempDir(), Targets: targets, RuleFiles: ruleFiles})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Stop sends SIGTERM and waits for Prometheus to exit (10 s, then SIGKILL).
// Stopping a stopped server does nothing.
func (s *Server) Stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Log returns what Prometheus printed (for failure messages).
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.LogFile)
	return string(b)
}

func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if s.ready(ctx) {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("prometheus exited before it was ready: see %s\n%s", s.LogFile, s.Log())
		case <-ctx.Done():
			return fmt.Errorf("prometheus at %s not ready: %w (log %s)\n%s", s.URL, ctx.Err(), s.LogFile, s.Log())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *Server) ready(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/-/ready", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
