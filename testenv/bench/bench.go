package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/lab"
	"github.com/drainwatch/drainwatch/testenv/node"
)

// Config bounds a run: every load is Rounds × modes × 2 wrk runs of
// Duration each.
type Config struct {
	Rounds      int
	Duration    time.Duration
	Connections int
	Threads     int
	Pods        []int  // RSS is measured with this many pods on the daemon's node, in order; none: skipped
	Drainwatch  string // the binary; empty: built from this tree
	Dir         string // cluster state, daemon logs
	Out         io.Writer
	Log         zerolog.Logger
}

// Report is everything a run measured.
type Report struct {
	Samples []Sample
	RSS     []RSS
}

// bench is a run in progress.
type bench struct {
	cfg        Config
	c          *cluster.Cluster
	cgroupRoot string
}

// Run starts a two-node testenv, measures and stops it.
func Run(ctx context.Context, cfg Config) (Report, error) {
	b := &bench{cfg: cfg}
	if err := b.prepare(ctx); err != nil {
		return Report{}, err
	}
	c, err := cluster.Start(ctx, cluster.Options{Nodes: 2, NodePrefix: fmt.Sprintf("bench%d-", os.Getpid()),
		Log: cfg.Log, Dir: cfg.Dir})
	if err != nil {
		return Report{}, err
	}
	b.c = c
	var r Report
	r.Samples, err = b.overhead(ctx)
	if err == nil {
		r.RSS, err = b.rss(ctx)
	}
	return r, errors.Join(err, c.Stop())
}

func (b *bench) prepare(ctx context.Context) error {
	var err error
	if b.cgroupRoot, err = node.Cgroup2Mount(); err != nil {
		return err
	}
	if b.cfg.Drainwatch != "" {
		return nil
	}
	b.cfg.Drainwatch, err = lab.BuildDrainwatch(ctx, b.cfg.Dir)
	return err
}

func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.cfg.Out, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// startDaemon runs `drainwatch run` for a node as the lab does, unpinned
// and from a fresh state directory: each mode of each round starts cold.
func (b *bench) startDaemon(ctx context.Context, nodeName string) (*lab.Daemon, error) {
	return lab.StartDaemon(ctx, lab.DaemonSpec{Bin: b.cfg.Drainwatch, Node: nodeName, Kubeconfig: b.c.Kubeconfig,
		CgroupRoot: b.cgroupRoot, Dir: b.cfg.Dir, Unpinned: true})
}
