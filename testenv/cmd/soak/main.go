// Command soak is `make soak`: one testenv node, the real drainwatch
// binary, 50 pods and a rollout every minute for an hour (see package
// testenv/soak). It prints one line per round and per sample, writes
// samples.csv, rounds.csv and plot.txt into --out, and exits 1 when a
// termination was not exact or a sample broke its bound.
//
//	soak [--duration 1h] [--pods 50] [--every 1m] [--out results/soak-<timestamp>] [--drainwatch bin/drainwatch]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/testenv/lab"
	"github.com/drainwatch/drainwatch/testenv/soak"
)

func main() { os.Exit(run()) }

func run() int {
	var cfg soak.Config
	duration := time.Hour
	if v := os.Getenv("SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintf(os.Stderr, "soak: SOAK_DURATION=%q: %v\n", v, err)
			return 2
		}
		duration = d
	}
	flag.DurationVar(&cfg.Duration, "duration", duration, "how long rollouts start (env SOAK_DURATION)")
	flag.IntVar(&cfg.Pods, "pods", 50, "replicas of the rolled-out Deployment")
	flag.DurationVar(&cfg.Every, "every", time.Minute, "one rollout per this interval")
	flag.StringVar(&cfg.Out, "out", filepath.Join("results", "soak-"+time.Now().Format("20060102-150405")), "results directory")
	flag.StringVar(&cfg.Drainwatch, "drainwatch", "bin/drainwatch", "the drainwatch binary (make build)")
	flag.DurationVar(&cfg.KeepCompleted, "keep-completed", 10*time.Minute, "the daemon's --keep-completed: the state store and the memory reach their steady state after it (production: 168h)")
	flag.DurationVar(&cfg.SeriesTTL, "series-ttl", 10*time.Minute, "the daemon's --series-ttl: the revisions' series, and the UIDs counted into them, are flat after it (production: 1h)")
	flag.Parse()
	if abs, err := filepath.Abs(cfg.Out); err == nil {
		cfg.Out = abs
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "soak: needs root (network namespaces, cgroups, eBPF): sudo make soak")
		return 2
	}
	cfg.Progress = lab.NewProgress(os.Stdout)
	cfg.Log = zerolog.New(zerolog.NewConsoleWriter(func(w *zerolog.ConsoleWriter) { w.Out = os.Stderr })).
		Level(zerolog.WarnLevel).With().Timestamp().Logger()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg.Progress.Step("soak: %d pods, a rollout every %v for %v, results in %s", cfg.Pods, cfg.Every, cfg.Duration, cfg.Out)
	report, err := soak.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 1
	}
	if !report.OK() {
		return 1
	}
	return 0
}
