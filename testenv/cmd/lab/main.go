// Command lab is `make lab`: a two-node testenv cluster, the real
// drainwatch binary on each node and a real Prometheus, then the seeds'
// experiment, a rolling update behind a lagging router before and after a
// preStop sleep, a PID 1 that ignores SIGTERM, a failing preStop and
// Debian's nginx stopped by its image's SIGQUIT. It prints one line per
// step, each scenario's timelines beside the clients' log, and a final
// table of the ground truth's counts (refused, killed, probe refused, reset
// at shutdown) next to drainwatch's; it exits 1 when any pair differs. See
// package testenv/lab.
//
//	lab [--out results/<timestamp>] [--drainwatch bin/drainwatch]
//	    [--scenario seeds --scenario rollout ...] [--screenshots=true]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/testenv/lab"
)

type scenarioFlags []string

func (s *scenarioFlags) String() string     { return strings.Join(*s, ",") }
func (s *scenarioFlags) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	os.Exit(run())
}

func run() int {
	var cfg lab.Config
	var scenarios scenarioFlags
	flag.StringVar(&cfg.Out, "out", filepath.Join("results", time.Now().Format("20060102-150405")), "results directory")
	flag.StringVar(&cfg.Drainwatch, "drainwatch", "bin/drainwatch", "the drainwatch binary (make build)")
	flag.Var(&scenarios, "scenario", "run only scenarios whose name starts with this (repeatable): seeds, rollout, ignore-term, prestop-fails, nginx-sigquit, kube-proxy, l7, stop, exit, ipv6, mesh, startup, real")
	flag.BoolVar(&cfg.Screenshots, "screenshots", true, "screenshot the daemons' /ui pages with headless chromium")
	flag.BoolVar(&cfg.RealNode, "real-node", true, "add a real node (kubelet, containerd: make realnode) and its real/ scenarios")
	flag.StringVar(&cfg.NodePrefix, "node-prefix", "lab-", "node names <prefix>1, <prefix>2 (another prefix lets a second lab run beside one already running)")
	flag.Parse()
	cfg.Scenarios = scenarios
	if abs, err := filepath.Abs(cfg.Out); err == nil {
		cfg.Out = abs
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "lab: needs root (network namespaces, cgroups, eBPF): sudo make lab")
		return 2
	}
	start := time.Now()
	cfg.Progress = lab.NewProgress(os.Stdout)
	cfg.Log = zerolog.New(zerolog.NewConsoleWriter(func(w *zerolog.ConsoleWriter) { w.Out = os.Stderr })).
		Level(zerolog.WarnLevel).With().Timestamp().Logger()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	results, err := lab.Run(ctx, cfg)
	fmt.Printf("\n%s\n", lab.Table(results))
	fmt.Printf("results: %s (wall time %s)\n", cfg.Out, time.Since(start).Round(time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		return 1
	}
	if !lab.AllAgree(results) {
		fmt.Println("FAIL: drainwatch's counts differ from the clients' (rows marked NO)")
		return 1
	}
	fmt.Println("PASS: every pair is equal")
	return 0
}
