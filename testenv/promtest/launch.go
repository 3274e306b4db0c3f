package promtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// PrometheusBin is Debian's Prometheus server.
const PrometheusBin = "/usr/bin/prometheus"

// ScrapeInterval is the default scrape and rule evaluation interval: short,
// so a caller sees a counter within seconds.
const ScrapeInterval = time.Second

// Options configures Launch.
type Options struct {
	Dir       string   // prometheus.yml, data/ and prometheus.log; created when missing
	Targets   []string // "127.0.0.1:port", scraped at /metrics under job "drainwatch"
	RuleFiles []string // alerting and recording rules; firing alerts show in ALERTS
	// TargetLabels are extra labels per target (as the PodMonitor's
	// relabelling adds node), keyed by the target's address.
	TargetLabels map[string]map[string]string
	// ScrapeInterval is also the rule evaluation interval; 0 means the
	// package's ScrapeInterval.
	ScrapeInterval time.Duration
	// Config, when set, is the whole prometheus.yml (e.g. one the
	// Prometheus Operator generated); Targets, RuleFiles and TargetLabels
	// are then unused.
	Config []byte
}

// Launch runs Prometheus on a free 127.0.0.1 port and waits (at most 30 s,
// and no longer than ctx) until it is ready. ctx bounds only the start: the
// server runs until Stop, or until the caller's process dies (the kernel
// kills it then, so no Prometheus outlives an interrupted test or lab).
func Launch(ctx context.Context, opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, errors.New("promtest.Launch: Options.Dir is empty")
	}
	if _, err := os.Stat(PrometheusBin); err != nil {
		return nil, fmt.Errorf("%s missing: install Debian's prometheus package (make deps): %w", PrometheusBin, err)
	}
	if opts.ScrapeInterval == 0 {
		opts.ScrapeInterval = ScrapeInterval
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", opts.Dir, err)
	}
	cfg := filepath.Join(opts.Dir, "prometheus.yml")
	text := opts.Config
	if text == nil {
		text = []byte(config(opts))
	}
	if err := os.WriteFile(cfg, text, 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", cfg, err)
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + addr, LogFile: filepath.Join(opts.Dir, "prometheus.log"),
		interval: opts.ScrapeInterval, done: make(chan struct{})}
	if err := s.start(opts.Dir, cfg, addr); err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func config(opts Options) string {
	return fmt.Sprintf(`global:
  scrape_interval: %s
  evaluation_interval: %s
rule_files: [%s]
scrape_configs:
  - job_name: drainwatch
    static_configs:
%s`, opts.ScrapeInterval, opts.ScrapeInterval, quoteAll(opts.RuleFiles), staticConfigs(opts))
}

// staticConfigs is one static config per target, so each can carry its
// own labels.
func staticConfigs(opts Options) string {
	var b strings.Builder
	for _, t := range opts.Targets {
		fmt.Fprintf(&b, "      - targets: [%q]\n", t)
		labels := opts.TargetLabels[t]
		if len(labels) == 0 {
			continue
		}
		b.WriteString("        labels:\n")
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			fmt.Fprintf(&b, "          %s: %q\n", k, labels[k])
		}
	}
	return b.String()
}

func quoteAll(ss []string) string {
	quoted := make([]string, len(ss))
	for i, s := range ss {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(quoted, ", ")
}

func (s *Server) start(dir, cfg, addr string) error {
	out, err := os.Create(s.LogFile)
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
	go func() { _ = s.cmd.Wait(); out.Close(); close(s.done) }()
	return nil
}

func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
