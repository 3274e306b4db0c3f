// Package lab is drainwatch's lab: a two-node testenv cluster (real control
// plane, node agents, the real kernel), the real `drainwatch run` binary per
// node, a real Prometheus scraping them, and the scenarios of issue 6 — the
// seeds' experiment, a rolling update behind a lagging router before and
// after a preStop sleep, a PID 1 that ignores SIGTERM, a failing preStop,
// Debian's nginx stopped by its image's SIGQUIT — each comparing what
// ground-truth clients saw with what drainwatch reported. `make lab` (testenv/cmd/lab) and this package's test share it.
package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/kubeproxy"
	"github.com/drainwatch/drainwatch/testenv/node"
	"github.com/drainwatch/drainwatch/testenv/otelcol"
	"github.com/drainwatch/drainwatch/testenv/promtest"
	"github.com/drainwatch/drainwatch/testenv/realnode"
	"github.com/drainwatch/drainwatch/testenv/shipped"
)

// Config configures a lab run.
type Config struct {
	Out        string // results directory, created
	Drainwatch string // the drainwatch binary (make build: bin/drainwatch)
	// ControlPlane reuses a running control plane (tests share cptest's);
	// nil starts one and stops it at the end.
	ControlPlane *controlplane.ControlPlane
	NodePrefix   string // node names <prefix>1, <prefix>2; "lab-" when empty
	Progress     *Progress
	Log          zerolog.Logger // testenv's own logs (warnings)
	// Scenarios selects scenarios by name prefix ("seeds", "rollout",
	// "ignore-term", "prestop-fails", "nginx-sigquit", "kube-proxy", "l7",
	// "stop", "exit");
	// empty runs them all.
	Scenarios   []string
	Screenshots bool // the /ui pages, with headless chromium
	// RealNode adds a real node (testenv/realnode: kubelet, containerd,
	// runc, CNI; make realnode) with its own drainwatch, and the real/
	// scenarios that run on it.
	RealNode bool
}

// Lab is a running lab.
type Lab struct {
	cfg     Config
	Cluster *cluster.Cluster
	Daemons []*Daemon
	// RealNode is the real node when Config.RealNode.
	RealNode *realnode.Node
	Prom     *promtest.Server
	// Shipped is what the chart's shipped values install for serving and
	// scraping: the daemons run with its flags and certificate, Prometheus
	// with the operator's configuration for its PodMonitor.
	Shipped *shipped.Install
	// readerToken reads the daemons' API (the drainwatch audience).
	readerToken string
	// promStart is when Prometheus first scraped both daemons: the
	// dashboard check's range starts there.
	promStart time.Time
	// otelcol receives the daemons' records over OTLP (checkOTLP).
	otelcol    *otelcol.Collector
	progress   *Progress
	clusterDir string
	// runs are the scenarios' records, in run order, for the artifacts.
	runs []scenarioRun
}

// scenarioRun is what a scenario leaves for the results directory.
type scenarioRun struct {
	Name       string
	Namespace  string
	Timelines  []exporter.TerminationView
	Text       string // drainwatch timeline's output
	ClientLogs any
}

// Start brings up the cluster, one drainwatch per node and Prometheus.
func Start(ctx context.Context, cfg Config) (*Lab, error) {
	if cfg.NodePrefix == "" {
		cfg.NodePrefix = "lab-"
	}
	if cfg.Progress == nil {
		cfg.Progress = NewProgress(nil)
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, fmt.Errorf("creating results directory: %w", err)
	}
	l := &Lab{cfg: cfg, progress: cfg.Progress}
	if err := l.start(ctx); err != nil {
		return nil, errors.Join(err, l.Stop())
	}
	return l, nil
}

func (l *Lab) start(ctx context.Context) error {
	var err error
	if l.clusterDir, err = os.MkdirTemp("", "drainwatch-lab-"); err != nil {
		return fmt.Errorf("cluster state directory: %w", err)
	}
	l.progress.Step("starting testenv: control plane and 2 nodes (state in %s)", l.clusterDir)
	// The node agents report no status.stopSignal, as kubelets without the
	// ContainerStopSignals gate (most clusters today): drainwatch takes the
	// stop signal from the kernel (nginx's image STOPSIGNAL SIGQUIT in
	// nginx-sigquit); no scenario sets lifecycle.stopSignal.
	// The real kube-proxy (nftables) runs on both nodes for the kube-proxy
	// scenarios; the others never dial a ClusterIP.
	l.Cluster, err = cluster.Start(ctx, cluster.Options{Nodes: 2, NodePrefix: l.cfg.NodePrefix,
		ControlPlane: l.cfg.ControlPlane, Log: l.cfg.Log, Dir: l.clusterDir, DisableContainerStopSignals: true,
		KubeProxy: kubeproxy.NFTables, KubeProxyMinSync: KubeProxyMinSync})
	if err != nil {
		return fmt.Errorf("starting testenv: %w", err)
	}
	l.progress.Step("testenv up: nodes %v, KUBECONFIG=%s", l.Cluster.NodeNames, l.Cluster.Kubeconfig)
	if l.cfg.RealNode {
		if err := l.startRealNode(ctx); err != nil {
			return err
		}
	}
	if err := l.installShipped(ctx); err != nil {
		return err
	}
	if err := l.startDaemons(ctx); err != nil {
		return err
	}
	return l.startPrometheus(ctx)
}

func (l *Lab) startDaemons(ctx context.Context) error {
	root, err := node.Cgroup2Mount()
	if err != nil {
		return err
	}
	dir := filepath.Join(l.cfg.Out, "daemons")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := l.startCollector(ctx); err != nil {
		return err
	}
	for _, name := range l.nodeNames() {
		d, err := StartDaemon(ctx, DaemonSpec{Bin: l.cfg.Drainwatch, Node: name, Kubeconfig: l.Cluster.Kubeconfig,
			CgroupRoot: root, Dir: dir, WatchAllNodes: true, Shipped: l.Shipped, Token: l.readerToken,
			Args: []string{"--startup-window=" + labStartupWindow.String(),
				"--otlp-endpoint=" + l.otelcol.GRPCAddr(), "--otlp-insecure"}})
		if err != nil {
			return err
		}
		l.Daemons = append(l.Daemons, d)
		l.progress.Step("drainwatch run --node-name=%s: ready at %s (log %s)", name, d.URL, d.Log)
	}
	return nil
}

// installShipped applies what the chart's shipped values install for
// serving and scraping (testenv/shipped; the PodMonitor's interval 1 s,
// the lab's) and gets the lab's reader token.
func (l *Lab) installShipped(ctx context.Context) error {
	var err error
	if l.Shipped, err = shipped.Apply(ctx, l.Cluster.CP, filepath.Join(l.cfg.Out, "shipped"), "podMonitor.interval=1s"); err != nil {
		return fmt.Errorf("installing the shipped values' TLS and scraper: %w", err)
	}
	if l.readerToken, err = l.Shipped.ReaderToken(ctx, "lab-reader"); err != nil {
		return err
	}
	l.progress.Step("shipped values: daemons serve with %v, scraped as %s", l.Shipped.DaemonArgs, l.Shipped.ServerName)
	return nil
}

// startPrometheus runs Debian's Prometheus with the configuration the
// Prometheus Operator generates for the chart's PodMonitor (TLS verified
// with the generated CA, the scraper's token; each target labelled with
// its node by the PodMonitor's relabelling), scraping the daemons every
// second and evaluating the shipped alert rules every second; its data and
// log in <out>/prometheus.
func (l *Lab) startPrometheus(ctx context.Context) error {
	targets := make([]shipped.Target, len(l.Daemons))
	for i, d := range l.Daemons {
		targets[i] = shipped.Target{Node: d.Node, Addr: d.Addr}
	}
	rules, err := repoFile(alertRules)
	if err != nil {
		return err
	}
	config, err := l.Shipped.PrometheusConfig(ctx, targets, []string{rules})
	if err != nil {
		return err
	}
	l.Prom, err = promtest.Launch(ctx, promtest.Options{Dir: filepath.Join(l.cfg.Out, "prometheus"), Config: config})
	if err != nil {
		return err
	}
	up := fmt.Sprintf(`sum(up{job="drainwatch/drainwatch"}) == %d`, len(targets))
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := l.Prom.QueryWhen(qctx, up, nonEmpty); err != nil {
		return fmt.Errorf("prometheus never scraped both daemons: %w (log %s)", err, l.Prom.LogFile)
	}
	l.promStart = time.Now()
	l.progress.Step("prometheus at %s scrapes the daemons every second over TLS with the scraper's token (the operator's configuration for the chart's PodMonitor), rules %s", l.Prom.URL, rules)
	return nil
}

// Stop stops Prometheus, the daemons (their exit errors are returned) and
// the cluster, and removes the cluster's state directory.
func (l *Lab) Stop() error {
	var errs []error
	if l.Prom != nil {
		l.Prom.Stop()
	}
	errs = append(errs, stopAll(l.Daemons))
	if l.otelcol != nil {
		errs = append(errs, l.otelcol.Stop())
	}
	errs = append(errs, l.stopRealNode())
	if l.Cluster != nil {
		errs = append(errs, l.Cluster.Stop())
	}
	if l.clusterDir != "" {
		errs = append(errs, os.RemoveAll(l.clusterDir))
	}
	l.progress.Step("lab stopped: cluster, daemons and prometheus are gone")
	return errors.Join(errs...)
}
