package lab

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/drainwatch/drainwatch/exporter/promtest"
)

// Prometheus is Debian's Prometheus scraping the daemons every second, on
// 127.0.0.1. promtest.Start needs a *testing.T; the lab runs outside tests
// too, so it starts the process itself and queries through promtest.
type Prometheus struct {
	*promtest.Server // URL, Query, QueryWhen
	Log              string
	cmd              *exec.Cmd
	done             chan struct{}
}

// StartPrometheus runs Prometheus with its data in dir, scraping targets
// ("127.0.0.1:port"), and waits until it is ready.
func StartPrometheus(ctx context.Context, dir string, targets []string) (*Prometheus, error) {
	if _, err := os.Stat(promtest.PrometheusBin); err != nil {
		return nil, fmt.Errorf("%s missing: install Debian's prometheus package (make deps): %w", promtest.PrometheusBin, err)
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(promConfig(targets)), 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", cfg, err)
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	p := &Prometheus{Server: &promtest.Server{URL: "http://" + addr}, Log: filepath.Join(dir, "prometheus.log"),
		done: make(chan struct{})}
	logf, err := os.Create(p.Log)
	if err != nil {
		return nil, fmt.Errorf("creating the Prometheus log: %w", err)
	}
	p.cmd = exec.Command(promtest.PrometheusBin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--storage.tsdb.retention.time=1h")
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", promtest.PrometheusBin, err)
	}
	go func() { _ = p.cmd.Wait(); logf.Close(); close(p.done) }()
	if err := p.waitReady(ctx); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

func promConfig(targets []string) string {
	quoted := make([]string, len(targets))
	for i, t := range targets {
		quoted[i] = fmt.Sprintf("%q", t)
	}
	return fmt.Sprintf(`global:
  scrape_interval: %s
  evaluation_interval: %s
scrape_configs:
  - job_name: drainwatch
    static_configs:
      - targets: [%s]
`, promtest.ScrapeInterval, promtest.ScrapeInterval, strings.Join(quoted, ", "))
}

func (p *Prometheus) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if code, _ := httpGet(ctx, p.URL+"/-/ready", io.Discard); code == http.StatusOK {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("prometheus exited before ready: see %s", p.Log)
		case <-ctx.Done():
			return fmt.Errorf("prometheus at %s not ready: %w (log %s)", p.URL, ctx.Err(), p.Log)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM and waits (10 s, then SIGKILL).
func (p *Prometheus) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
