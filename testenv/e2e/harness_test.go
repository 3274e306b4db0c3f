package e2e_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/daemon"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// nodeDaemon is one node's drainwatch, run in-process.
type nodeDaemon struct {
	node, stateDir string
	pinPath        string // empty: the kernel side is not pinned
	*daemon.Daemon
	stop func()
}

// logger is a daemon's log, kept out of the test's output unless the test
// fails: then its last daemonLogLines lines follow the test's own lines,
// which come first, where a failure's reason is easy to find (CI shows a
// failing test's first and last lines).
func logger(t *testing.T, level zerolog.Level) zerolog.Logger {
	l := &daemonLog{}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.dropped > 0 {
			t.Logf("daemon log: %d earlier lines not kept", l.dropped)
		}
		for _, line := range l.lines {
			t.Log(line)
		}
	})
	return zerolog.New(l).Level(level).With().Timestamp().Logger()
}

// daemonLogLines bounds what a failing test prints of one daemon's log.
const daemonLogLines = 400

// daemonLog keeps the last daemonLogLines lines written to it. Writes after
// the test has ended (a daemon goroutine winding down) are kept too and
// never reach the finished test.
type daemonLog struct {
	mu      sync.Mutex
	lines   []string
	dropped int
}

func (l *daemonLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == daemonLogLines {
		l.lines = slices.Delete(l.lines, 0, 1)
		l.dropped++
	}
	l.lines = append(l.lines, strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// startCluster starts nodes node agents and one daemon per node.
func startCluster(t *testing.T, prefix string, nodes int) (*cluster.Cluster, []*nodeDaemon) {
	return startClusterWith(t, prefix, cluster.Options{Nodes: nodes})
}

// startClusterWith is startCluster with the node agents' options (nodes,
// stop-signal reporting) taken from opts.
func startClusterWith(t *testing.T, prefix string, opts cluster.Options) (*cluster.Cluster, []*nodeDaemon) {
	t.Helper()
	c := startNodes(t, prefix, opts)
	var ds []*nodeDaemon
	for _, name := range c.NodeNames {
		ds = append(ds, startDaemon(t, c.RestConfig, name, t.TempDir()))
	}
	return c, ds
}

// startNodes starts the node agents of opts, without daemons.
func startNodes(t *testing.T, prefix string, opts cluster.Options) *cluster.Cluster {
	t.Helper()
	privileged.RequireRoot(t)
	cp := cptest.Get(t)
	warn := zerolog.New(zerolog.NewConsoleWriter(func(w *zerolog.ConsoleWriter) { w.Out = os.Stderr })).Level(zerolog.WarnLevel)
	opts.NodePrefix, opts.ControlPlane, opts.Log, opts.Dir = unique(strings.TrimSuffix(prefix, "-"))+"-", cp, warn, t.TempDir()
	return cluster.StartT(t, opts)
}

// startDaemon runs a daemon for node with the real kernel collector.
func startDaemon(t *testing.T, rc *rest.Config, node, stateDir string) *nodeDaemon {
	t.Helper()
	return startDaemonPinned(t, rc, node, stateDir, "")
}

// startDaemonPinned runs a daemon whose BPF programs and maps are pinned
// under pinPath (see daemon.Config.PinPath), so a restart resumes them.
func startDaemonPinned(t *testing.T, rc *rest.Config, node, stateDir, pinPath string) *nodeDaemon {
	t.Helper()
	return runDaemon(t, daemonConfig(t, rc, node, stateDir, pinPath))
}

// startDaemonWith is startDaemonPinned with the configuration changed by
// mod.
func startDaemonWith(t *testing.T, rc *rest.Config, node, stateDir, pinPath string, mod func(*daemon.Config)) *nodeDaemon {
	t.Helper()
	cfg := daemonConfig(t, rc, node, stateDir, pinPath)
	mod(&cfg)
	return runDaemon(t, cfg)
}

// daemonConfig is the configuration of a node's daemon in these tests.
func daemonConfig(t *testing.T, rc *rest.Config, node, stateDir, pinPath string) daemon.Config {
	rc = rest.CopyConfig(rc)
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	return daemon.Config{
		NodeName: node, Rest: rc, StateDir: stateDir, PinPath: pinPath,
		Log:       logger(t, zerolog.InfoLevel).With().Str("node", node).Logger(),
		Correlate: correlate.Config{KernelTail: time.Second, StartupWindow: startupWindow, BlackholeWindow: blackholeWindow},
	}
}

// blackholeWindow is the daemons' --blackhole-window: shorter than the
// default 10 s so that every termination does not wait that long, longer
// than a lagging router's last SYN after pod_gone (its lag, 1.5 s in
// these tests) plus the node's neighbour resolution (3 s).
const blackholeWindow = 5 * time.Second

// runDaemon runs a daemon until the test ends.
func runDaemon(t *testing.T, cfg daemon.Config) *nodeDaemon {
	t.Helper()
	node, stateDir, pinPath := cfg.NodeName, cfg.StateDir, cfg.PinPath
	d, err := daemon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	nd := &nodeDaemon{node: node, stateDir: stateDir, pinPath: pinPath, Daemon: d}
	stopped := false
	nd.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("daemon of %s: %v", node, err)
			}
		}
	}
	t.Cleanup(nd.stop)
	return nd
}

// daemonOf returns the daemon of the pod's node.
func daemonOf(t *testing.T, ds []*nodeDaemon, p *corev1.Pod) *nodeDaemon {
	t.Helper()
	for _, d := range ds {
		if d.node == p.Spec.NodeName {
			return d
		}
	}
	t.Fatalf("no daemon for node %q of pod %s", p.Spec.NodeName, p.Name)
	return nil
}

// waitWatching waits until the pods' daemons watch their network namespaces.
func waitWatching(ctx context.Context, t *testing.T, ds []*nodeDaemon, pods []corev1.Pod) {
	t.Helper()
	for i := range pods {
		d, uid := daemonOf(t, ds, &pods[i]), string(pods[i].UID)
		err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
			return d.Watching(uid), nil
		})
		if err != nil {
			t.Fatalf("daemon of %s never watched pod %s: %v", d.node, pods[i].Name, err)
		}
	}
}

// waitComplete waits until the daemon's termination of uid is complete.
func waitComplete(ctx context.Context, t *testing.T, d *nodeDaemon, uid string) correlate.Termination {
	t.Helper()
	var last correlate.Termination
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		var ok bool
		last, ok = d.Get(uid)
		return ok && last.Complete, nil
	})
	if err != nil {
		t.Fatalf("termination of %s not complete on %s: %v (last %+v)", uid, d.node, err, last)
	}
	return last
}

// unique suffixes a name, so that repeated runs (-count) on the shared
// control plane never meet the previous run's nodes, pods or namespaces.
func unique(prefix string) string { return prefix + "-" + rand.String(4) }

// corev1Pod shortens signatures.
type corev1Pod = corev1.Pod

// terminationsTotal sums drainwatch_terminations_total over its series.
func terminationsTotal(d *nodeDaemon) float64 {
	return counterSum(d, "drainwatch_terminations_total", "")
}

// counterSum sums a counter of the daemon over its series of namespace ns
// (every namespace when ns is ""); -1 when the registry cannot be read.
func counterSum(d *nodeDaemon, name, ns string) float64 {
	return counterWith(d, name, "namespace", ns)
}

// counterWith sums a counter of the daemon over its series whose label is
// value (every series when value is ""); -1 when the registry cannot be
// read.
func counterWith(d *nodeDaemon, name, label, value string) float64 {
	mfs, err := d.Metrics().Registry().Gather()
	if err != nil {
		return -1
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if value == "" || slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
				return l.GetName() == label && l.GetValue() == value
			}) {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

func codes(t correlate.Termination) []string {
	var out []string
	for _, d := range t.Diagnoses {
		out = append(out, d.Code)
	}
	return out
}
