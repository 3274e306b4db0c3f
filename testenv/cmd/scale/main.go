// Command scale is `make scale`: what drainwatch's kube side costs the API
// server with many nodes. It starts the real control plane, registers
// hollow nodes, runs collector/kube once per node in this process and a
// rollout restart of every pod, once per design (none, scoped, naive), and
// prints the table and its extrapolation. See package testenv/scale.
//
//	scale [--nodes 200] [--pods 2000] [--namespaces 4] [--deployments 5]
//	      [--designs none,scoped,naive] [--out results/scale-<timestamp>.txt]
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

	"github.com/drainwatch/drainwatch/testenv/scale"
)

func main() {
	os.Exit(run())
}

func run() int {
	cfg := scale.Config{Log: zerolog.New(zerolog.NewConsoleWriter(func(w *zerolog.ConsoleWriter) { w.Out = os.Stderr })).
		Level(zerolog.WarnLevel).With().Timestamp().Logger()}
	var designs, out string
	flag.IntVar(&cfg.Nodes, "nodes", 200, "hollow nodes, one daemon each")
	flag.IntVar(&cfg.Pods, "pods", 2000, "pods, spread over namespaces x deployments")
	flag.IntVar(&cfg.Namespaces, "namespaces", 4, "namespaces")
	flag.IntVar(&cfg.DeploymentsPerNamespace, "deployments", 5, "deployments (each with a service) per namespace")
	flag.StringVar(&designs, "designs", "none,scoped,naive", "designs to measure, one rollout each, in order")
	flag.DurationVar(&cfg.StopAfter, "stop-after", time.Second, "how long a hollow container takes to exit after its stop signal")
	flag.DurationVar(&cfg.RolloutTimeout, "rollout-timeout", 6*time.Minute, "bound on each rollout")
	flag.StringVar(&out, "out", filepath.Join("results", "scale-"+time.Now().Format("20060102-150405")+".txt"), "file the report is written to")
	flag.Parse()
	for _, d := range strings.Split(designs, ",") {
		cfg.Designs = append(cfg.Designs, scale.Design(strings.TrimSpace(d)))
	}
	start := time.Now()
	cfg.Progress = func(format string, args ...any) {
		fmt.Printf("[%5.0fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	report, err := scale.Run(ctx, cfg)
	text := report.Text()
	fmt.Print(text)
	if werr := write(out, text); werr != nil {
		fmt.Fprintln(os.Stderr, "scale:", werr)
	} else {
		fmt.Printf("report: %s (wall time %s)\n", out, time.Since(start).Round(time.Second))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		return 1
	}
	return 0
}

func write(path, text string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	return os.WriteFile(path, []byte(text), 0o644)
}
