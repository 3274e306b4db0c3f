// Package soak is drainwatch's long run (`make soak`, not part of `make
// test`): one testenv node, the real `drainwatch run` binary pinned as in
// production, a Deployment of Pods naive servers behind a lagging router
// and a rollout every Every for Duration. Every replaced pod's termination
// is compared with the router's and the kubelet prober's records (exact or
// a failure); after each round the daemon's RSS, goroutines, open fds,
// bbolt file size and pinned map occupancy are sampled into samples.csv and
// plotted as text (plot.txt); Check then holds them to stated bounds.
package soak

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/lab"
	"github.com/drainwatch/drainwatch/testenv/node"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// Config configures a soak run.
type Config struct {
	Out        string // results directory, created
	Drainwatch string // the drainwatch binary (make build: bin/drainwatch)
	// KeepCompleted is the daemon's --keep-completed: short enough that
	// the run reaches the state store's steady state (production keeps 7
	// days, and its store grows for 7 days before it is flat).
	KeepCompleted time.Duration
	// SeriesTTL is the daemon's --series-ttl, for the same reason: the
	// series of every revision, and the pod UIDs counted into them, are
	// held for it (production: 1 h).
	SeriesTTL time.Duration
	Duration  time.Duration // rollouts start until then; 1 h by default
	Pods      int           // replicas of the Deployment; 50 by default
	Every     time.Duration // one rollout per Every; 1 min by default
	Progress  *lab.Progress
	Log       zerolog.Logger // testenv's own logs (warnings)
}

func (c *Config) defaults() {
	if c.Duration <= 0 {
		c.Duration = time.Hour
	}
	if c.Pods <= 0 {
		c.Pods = 50
	}
	if c.Every <= 0 {
		c.Every = time.Minute
	}
	if c.KeepCompleted <= 0 {
		c.KeepCompleted = 10 * time.Minute
	}
	if c.SeriesTTL <= 0 {
		c.SeriesTTL = 10 * time.Minute
	}
	if c.Progress == nil {
		c.Progress = lab.NewProgress(nil)
	}
}

const (
	namespace = "soak"
	app       = "web"
)

// Report is what a run found.
type Report struct {
	Rounds       []Round
	Samples      []Sample
	Inexact      []string // one line per termination that was not exact
	BoundsBroken []string // one line per sample beyond its bound
}

// OK is true when every termination was exact and every sample in bounds.
func (r Report) OK() bool { return len(r.Inexact) == 0 && len(r.BoundsBroken) == 0 }

// soak is a running soak: its cluster, daemon and records.
type soak struct {
	cfg          Config
	cluster      *cluster.Cluster
	dir          string // the cluster's state (pod logs), removed at the end
	daemon       *lab.Daemon
	pinDir       string
	state        string
	terminations int // checked so far
	report       Report
}

// Run runs the soak and writes its results into cfg.Out. The error is a
// failure to run (the cluster, a stuck rollout); what the run found is in
// the Report.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg.defaults()
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return Report{}, fmt.Errorf("creating results directory: %w", err)
	}
	s := &soak{cfg: cfg}
	err := s.start(ctx)
	if err == nil {
		err = s.run(ctx)
	}
	err = errors.Join(err, s.stop())
	s.report.BoundsBroken = Check(s.report.Samples, cfg.Pods)
	return s.report, errors.Join(err, s.write())
}

func (s *soak) start(ctx context.Context) error {
	var err error
	if s.dir, err = os.MkdirTemp("", "drainwatch-soak-"); err != nil {
		return fmt.Errorf("cluster state directory: %w", err)
	}
	s.cfg.Progress.Step("starting testenv: control plane and 1 node (state in %s)", s.dir)
	c, err := cluster.Start(ctx, cluster.Options{Nodes: 1, NodePrefix: "soak-" + rand.String(4) + "-",
		Log: s.cfg.Log, Dir: s.dir})
	if err != nil {
		return fmt.Errorf("starting testenv: %w", err)
	}
	s.cluster = c
	root, err := node.Cgroup2Mount()
	if err != nil {
		return err
	}
	name := c.NodeNames[0]
	dir := filepath.Join(s.cfg.Out, "daemon")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	s.daemon, err = lab.StartDaemon(ctx, lab.DaemonSpec{Bin: s.cfg.Drainwatch, Node: name,
		Kubeconfig: c.Kubeconfig, CgroupRoot: root, Dir: dir, Args: []string{
			"--keep-completed=" + s.cfg.KeepCompleted.String(), "--series-ttl=" + s.cfg.SeriesTTL.String()}})
	if err != nil {
		return err
	}
	s.pinDir, s.state = pinDirOf(name), filepath.Join(dir, "state-"+name)
	s.cfg.Progress.Step("drainwatch run --node-name=%s: ready at %s (log %s, pins %s)", name, s.daemon.URL, s.daemon.Log, s.pinDir)
	dep := cluster.ServerDeployment(namespace, app, workload.ModeNaive, int32(s.cfg.Pods))
	if err := c.Apply(ctx, cluster.Namespace(namespace), dep, cluster.ServiceFor(namespace, app)); err != nil {
		return err
	}
	if _, err := c.WaitRolledOut(ctx, namespace, app); err != nil {
		return err
	}
	s.cfg.Progress.Step("%d pods of %s/%s running", s.cfg.Pods, namespace, app)
	return nil
}

func (s *soak) stop() error {
	var errs []error
	if s.daemon != nil {
		errs = append(errs, s.daemon.Stop())
	}
	if s.cluster != nil {
		errs = append(errs, s.cluster.Stop())
	}
	if s.dir != "" {
		errs = append(errs, os.RemoveAll(s.dir))
	}
	return errors.Join(errs...)
}
