// Command bench is the end-to-end half of `make bench`: a two-node testenv,
// Debian's nginx in a pod of node 1, Debian's wrk in the fabric namespace,
// and the real `drainwatch run` built from this tree, in interleaved rounds
// of no drainwatch, nothing watched, the pod watched and the pod
// terminating, for Connection: close and keep-alive; then the daemon's RSS
// with 110 and 250 pods on its node. It prints a table; the samples go to
// <out>/samples.json. See package testenv/bench.
//
//	bench [--rounds 5] [--duration 5s] [--connections 16] [--threads 1]
//	      [--pods 110,250] [--drainwatch bin/drainwatch] [--out results/bench-<time>]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/testenv/bench"
)

func main() {
	os.Exit(run())
}

func run() int {
	cfg := bench.Config{Out: os.Stdout}
	var pods, out string
	flag.IntVar(&cfg.Rounds, "rounds", 5, "interleaved rounds of every mode; 0 measures RSS and idle CPU only")
	flag.DurationVar(&cfg.Duration, "duration", 5*time.Second, "each wrk run's duration")
	flag.IntVar(&cfg.Connections, "connections", 16, "wrk -c")
	flag.IntVar(&cfg.Threads, "threads", 1, "wrk -t")
	flag.StringVar(&pods, "pods", "110,250", "pod counts on the daemon's node for RSS, comma-separated; empty skips")
	flag.StringVar(&cfg.Drainwatch, "drainwatch", "", "the drainwatch binary; empty: built from this tree")
	flag.StringVar(&out, "out", filepath.Join("results", "bench-"+time.Now().Format("20060102-150405")), "results directory")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "bench: needs root (network namespaces, cgroups, eBPF): sudo make bench")
		return 2
	}
	var err error
	if cfg.Pods, err = parsePods(pods); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	if cfg.Dir, err = filepath.Abs(out); err == nil {
		err = os.MkdirAll(cfg.Dir, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: results directory:", err)
		return 1
	}
	cfg.Log = zerolog.New(zerolog.NewConsoleWriter(func(w *zerolog.ConsoleWriter) { w.Out = os.Stderr })).
		Level(zerolog.WarnLevel).With().Timestamp().Logger()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	report, err := bench.Run(ctx, cfg)
	report.Print(os.Stdout, cfg.Rounds)
	if werr := writeSamples(filepath.Join(cfg.Dir, "samples.json"), report); werr != nil {
		fmt.Fprintln(os.Stderr, "bench:", werr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	return 0
}

func parsePods(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 250 {
			return nil, fmt.Errorf("--pods %q: want counts from 1 to 250 (one node's /24)", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func writeSamples(path string, r bench.Report) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o644)
}
