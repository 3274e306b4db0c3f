package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/drainwatch/drainwatch/collector/kernel"
	"github.com/drainwatch/drainwatch/collector/kube"
	"github.com/drainwatch/drainwatch/daemon"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
	"github.com/drainwatch/drainwatch/testenv/lab"
	"github.com/drainwatch/drainwatch/testenv/privileged"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// TestPodScope: a daemon started with --exclude-namespaces and
// --pod-selector observes only the pods in scope. Three naive servers on
// one node, each deleted under its own clients: the one in scope is
// counted exactly; the one in an excluded namespace and the one whose
// labels do not match are never watched in the kernel (their network
// namespaces are not in the pinned scopes map while they run) and no
// termination of theirs is recorded, although their clients were refused
// too.
func TestPodScope(t *testing.T) {
	privileged.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cp := cptest.Get(t)
	warn := zerolog.New(zerolog.NewConsoleWriter(func(w *zerolog.ConsoleWriter) { w.Out = os.Stderr })).Level(zerolog.WarnLevel)
	c := cluster.StartT(t, cluster.Options{Nodes: 1, NodePrefix: unique("e2s") + "-", ControlPlane: cp, Log: warn, Dir: t.TempDir()})
	in, excluded := unique("e2e-scope-in"), unique("e2e-scope-out")
	pinPath := filepath.Join("/sys/fs/bpf", "drainwatch-e2e-"+rand.String(6))
	t.Cleanup(func() { _ = kernel.RemovePins(pinPath) })
	scope, err := kube.ParsePodScope("", excluded+",kube-system", "tier!=batch")
	must(t, err)
	d := startDaemonWith(t, c.RestConfig, c.NodeNames[0], t.TempDir(), pinPath, func(cfg *daemon.Config) { cfg.Scope = scope })
	pinDir := filepath.Join(pinPath, c.NodeNames[0]) // the daemon pins under PinPath/<node>

	web := cluster.ServerDeployment(in, "web", workload.ModeNaive, 1)
	batch := cluster.ServerDeployment(in, "batch", workload.ModeNaive, 1)
	batch.Spec.Template.Labels["tier"] = "batch"
	other := cluster.ServerDeployment(excluded, "web", workload.ModeNaive, 1)
	pods := map[string]corev1.Pod{"in": deploy(ctx, t, c, in, web)[0], "batch": deploy(ctx, t, c, in, batch)[0],
		"excluded": deploy(ctx, t, c, excluded, other)[0]}
	watched := pods["in"]
	inodes := map[string]uint64{}
	for name, p := range pods {
		inodes[name] = netnsInode(t, c, &p)
	}
	waitWatching(ctx, t, []*nodeDaemon{d}, []corev1.Pod{watched})
	waitScopesWatched(ctx, t, c, pinDir, &watched)
	// For 2 s after the daemon watches the pod in scope (its scans bind a
	// new pod within one), the others' namespaces stay out of the kernel's
	// scopes. Not after their deletion: a freed namespace's inode can come
	// back as the ReplicaSet's replacement of the pod in scope.
	for range 20 {
		for _, name := range []string{"batch", "excluded"} {
			if p := pods[name]; scopeWatched(t, pinDir, inodes[name]) {
				t.Fatalf("pod %s/%s (%s) out of scope, yet its network namespace %d is watched in the kernel", p.Namespace, p.Name, name, inodes[name])
			}
		}
		time.Sleep(100 * time.Millisecond)
	}

	refused := map[string]int{}
	for name, p := range pods {
		addr := cluster.PodAddr(&p, cluster.ServerPort)
		res, err := client.Seeds{Dial: c.Dial, Target: addr, Pod: addr, Window: 2 * time.Second,
			Stop: func(ctx context.Context) error {
				return c.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
			}}.Run(ctx)
		must(t, err)
		refused[name] = lab.RefusedTo(addr, res.Work, res.Readiness, []client.Request{res.Slow})
	}
	got := waitComplete(ctx, t, d, string(watched.UID))
	if n := got.Counts.RefusedAfterSigterm; n != refused["in"] || n == 0 {
		t.Errorf("the pod in scope: drainwatch refused %d, its clients %d (want equal, and some)", n, refused["in"])
	}
	// The daemon's whole record: the one termination in scope.
	var others []string
	for _, term := range d.Terminations() {
		if term.PodUID != string(watched.UID) {
			others = append(others, term.Workload.Namespace+"/"+term.Pod)
		}
	}
	t.Logf("clients refused: %v; drainwatch: %d for %s, other terminations %v", refused, got.Counts.RefusedAfterSigterm, watched.Name, others)
	if len(others) > 0 || refused["batch"] == 0 || refused["excluded"] == 0 {
		t.Errorf("terminations out of scope recorded: %v (their clients were refused %d and %d times: want some, and none recorded)",
			others, refused["batch"], refused["excluded"])
	}
}

// netnsInode is the network namespace inode of a pod on the first node.
func netnsInode(t *testing.T, c *cluster.Cluster, p *corev1.Pod) uint64 {
	t.Helper()
	info, ok := c.Nodes[0].Pod(p.UID)
	if !ok {
		t.Fatalf("the node agent does not know pod %s", p.Name)
	}
	return uint64(info.NetnsInode)
}

// scopeWatched reports whether the pinned scopes map holds the network
// namespace ino.
func scopeWatched(t *testing.T, pinDir string, ino uint64) bool {
	t.Helper()
	scopes := pinnedScopes(t, pinDir)
	defer scopes.Close()
	var flags uint8
	return scopes.Lookup(scopeKey{ID: ino, Kind: 1}, &flags) == nil
}
