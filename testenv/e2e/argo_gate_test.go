package e2e_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/gotools"
	"github.com/drainwatch/drainwatch/testenv/promtest"
	"github.com/drainwatch/drainwatch/testenv/router"
)

var (
	rolloutsGVR     = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}
	analysisRunsGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "analysisruns"}
)

// argoLag is how late the router follows EndpointSlices.
const argoLag = 1500 * time.Millisecond

// argoGate is one run of the real Argo Rollouts controller (built from its
// Go module, make argo) against testenv's cluster, one drainwatch daemon
// and the real Prometheus scraping it, the gate being
// deploy/gates/argo-analysistemplate.yaml applied unchanged.
type argoGate struct {
	c    *cluster.Cluster
	ds   []*nodeDaemon
	prom *promtest.Server
	dyn  dynamic.Interface
}

// TestArgoGate: a canary of a Rollout of 2 behind a router 1.5 s late,
// under constant load (and slow requests that keep a stopping naive server
// alive while it refuses). Setting the canary's weight to 50 scales the
// stable ReplicaSet down by one pod; the analysis step then runs
// drainwatch's AnalysisTemplate with the stable and the canary
// pod-template hashes. Old pods without a preStop sleep refuse
// connections: the AnalysisRun fails on refused-after-stop-signal with
// the value drainwatch counted, equal to the router's refused dials to that
// pod, and the Rollout is aborted. Old pods that sleep longer than the
// router's lag refuse none: the AnalysisRun succeeds and the canary is
// promoted, 0 = 0 through every pod it replaced.
func TestArgoGate(t *testing.T) {
	controller, crds := gotools.ArgoRollouts(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	g := startArgoGate(ctx, t, controller, crds)
	t.Run("aborted", func(t *testing.T) { g.abortedCanary(ctx, t) })
	t.Run("promoted", func(t *testing.T) { g.promotedCanary(ctx, t) })
}

func startArgoGate(ctx context.Context, t *testing.T, controller, crds string) *argoGate {
	t.Helper()
	c := startNodes(t, "e2argo-", cluster.Options{Nodes: 1})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := daemonConfig(t, c.RestConfig, c.NodeNames[0], t.TempDir(), "")
	cfg.Listener = ln
	g := &argoGate{c: c, ds: []*nodeDaemon{runDaemon(t, cfg)}}
	g.prom = promtest.Start(t, ln.Addr().String())
	if g.dyn, err = dynamic.NewForConfig(c.RestConfig); err != nil {
		t.Fatal(err)
	}
	if out, err := c.Kubectl(ctx, "apply", "--server-side", "-f", crds); err != nil {
		t.Fatalf("installing Argo's CRDs: %v\n%s", err, out)
	}
	// kubectl wait fails at once on a CRD whose status has no conditions
	// yet (".status.conditions accessor error"), right after the apply:
	// asked again until every one is established, within a minute.
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := c.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=10s",
			"crd/rollouts.argoproj.io", "crd/analysisruns.argoproj.io", "crd/analysistemplates.argoproj.io")
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("Argo's CRDs not established: %v\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	startRolloutsController(t, controller, c.Kubeconfig)
	return g
}

// startRolloutsController runs the controller until the test ends (and
// no longer than the test's process: Pdeathsig). The control plane is this
// test process's own: the controller needs no --instance-id to keep off
// another's Rollouts.
func startRolloutsController(t *testing.T, bin, kubeconfig string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "rollouts-controller.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "--leader-elect=false",
		"--metricsport", freePort(t), "--healthzPort", freePort(t), "--loglevel", "info")
	cmd.Env = append(os.Environ(), "POD_NAMESPACE=default")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logFile.Close()
		if t.Failed() {
			t.Logf("rollouts-controller log (last lines):\n%s", strings.Join(cluster.TailMatching(logPath, "", 60), "\n"))
		}
	})
}

// freePort is a port free on this machine now: the controller's metrics
// and healthz servers listen on all addresses, not on its defaults (8090,
// 8080), which another test may hold.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// abortedCanary: old pods that close their listener at the stop signal.
func (g *argoGate) abortedCanary(ctx context.Context, t *testing.T) {
	ns := unique("e2e-argo-abort")
	r, stopLoad := g.deployRollout(ctx, t, ns, nil)
	defer stopLoad()
	stableHash := g.rolloutPods(ctx, t, ns)[0].Labels[rolloutHashLabel]
	g.changeTemplate(ctx, t, ns)
	ro := g.waitRollout(ctx, t, ns, "aborted", func(ro *unstructured.Unstructured) bool {
		abort, _, _ := unstructured.NestedBool(ro.Object, "status", "abort")
		return abort
	})
	run := g.analysisRun(ctx, t, ns)
	g.logRun(t, run)
	measured := failedMeasurement(run, "refused-after-stop-signal")
	canaryHash := str(ro, "status", "currentPodHash")
	t.Logf("aborted: Rollout phase %q, message %q, stable %s, canary %s", str(ro, "status", "phase"), str(ro, "status", "message"), stableHash, canaryHash)
	terms := g.settled(ctx, t, ns, stableHash)
	byRev := compareRefused(t, terms, r.Conns())
	// The analysis failed on the stable pod setWeight 50 removed: the canary's
	// pods go only after the abort.
	if byRev[stableHash].pods != 1 || byRev[stableHash].refused == 0 || measured != fmt.Sprintf("[%d]", byRev[stableHash].refused) {
		t.Errorf("stable revision: %d pods terminated, drainwatch refused %d, the failed measurement %q: want 1 pod, the same count, not 0",
			byRev[stableHash].pods, byRev[stableHash].refused, measured)
	}
	if phase := str(run, "status", "phase"); phase != "Failed" {
		t.Errorf("AnalysisRun phase %q, want Failed", phase)
	}
	g.checkPrometheus(ctx, t, ns, stableHash, canaryHash, byRev[stableHash].refused+byRev[canaryHash].refused)
}

// promotedCanary: old pods that sleep 3 s in preStop, longer than the
// router's lag.
func (g *argoGate) promotedCanary(ctx context.Context, t *testing.T) {
	ns := unique("e2e-argo-promote")
	sleep := &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 3}}}
	r, stopLoad := g.deployRollout(ctx, t, ns, sleep)
	defer stopLoad()
	stableHash := g.rolloutPods(ctx, t, ns)[0].Labels[rolloutHashLabel]
	g.changeTemplate(ctx, t, ns)
	ro := g.waitRollout(ctx, t, ns, "promoted", func(ro *unstructured.Unstructured) bool {
		return str(ro, "status", "phase") == "Healthy" && str(ro, "status", "stableRS") != stableHash &&
			str(ro, "status", "stableRS") == str(ro, "status", "currentPodHash")
	})
	run := g.analysisRun(ctx, t, ns)
	g.logRun(t, run)
	canaryHash := str(ro, "status", "stableRS")
	t.Logf("promoted: Rollout phase %q, stableRS %s (was %s)", str(ro, "status", "phase"), canaryHash, stableHash)
	terms := g.settled(ctx, t, ns, canaryHash)
	byRev := compareRefused(t, terms, r.Conns())
	if phase := str(run, "status", "phase"); phase != "Successful" {
		t.Errorf("AnalysisRun phase %q, want Successful", phase)
	}
	if old := byRev[stableHash]; old.pods != 2 || old.refused != 0 || old.unreached != 0 {
		t.Errorf("old revision: %d pods replaced, drainwatch refused %d, %d router dials unreached: want 2, 0 = 0, 0", old.pods, old.refused, old.unreached)
	}
	g.checkPrometheus(ctx, t, ns, stableHash, canaryHash, 0)
}

// rolloutHashLabel is Argo's pod-template hash label, drainwatch's revision
// of a Rollout's pods.
const rolloutHashLabel = "rollouts-pod-template-hash"

// revisionLoss is what one revision's terminated pods lost.
type revisionLoss struct{ pods, refused, unreached int }

// compareRefused compares, pod by pod, drainwatch's refusals and
// blackholed connections with the router's refused and otherwise failed
// dials to the pod's address, logs them, and sums them per revision.
func compareRefused(t *testing.T, terms []correlate.Termination, conns []router.Conn) map[string]revisionLoss {
	t.Helper()
	byRev := map[string]revisionLoss{}
	byBackend := lossByBackend(conns)
	for _, term := range terms {
		loss := byBackend[netip.AddrPortFrom(term.PodIP, cluster.ServerPort).String()]
		routed, unreached := loss.refused, loss.blackholed
		dw := term.Counts.RefusedAfterSigterm + term.Counts.RefusedBeforeSigterm
		t.Logf("  %s (revision %s, cause %s, outcome %s): drainwatch refused %d (%d before the stop signal) and blackholed %d, the router's refused dials %d, unreached %d",
			term.Pod, term.Workload.Revision, term.Cause, term.Outcome, dw, term.Counts.RefusedBeforeSigterm, term.Counts.ConnectionsBlackholed, routed, unreached)
		if dw != routed || term.Counts.ConnectionsBlackholed != unreached || term.Partial {
			t.Errorf("%s: drainwatch refused %d and blackholed %d, the router %d and %d (partial %v %v): want equal",
				term.Pod, dw, term.Counts.ConnectionsBlackholed, routed, unreached, term.Partial, term.PartialReasons)
		}
		l := byRev[term.Workload.Revision]
		byRev[term.Workload.Revision] = revisionLoss{pods: l.pods + 1, refused: l.refused + dw, unreached: l.unreached + unreached}
	}
	return byRev
}

// settled waits until the Rollout's pods are 2 Ready ones of revision
// hash, none terminating, and every termination of the namespace the
// daemon holds is complete, the same for 2 s; it returns them.
func (g *argoGate) settled(ctx context.Context, t *testing.T, ns, hash string) []correlate.Termination {
	t.Helper()
	var terms []correlate.Termination
	calm := 0
	for calm < 5 {
		if ctx.Err() != nil {
			t.Fatalf("namespace %s never settled on 2 pods of %s: %v", ns, hash, ctx.Err())
		}
		time.Sleep(500 * time.Millisecond)
		pods, err := g.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		cur := g.terminationsOf(ns)
		if err != nil || !steady(pods.Items, hash) || !allComplete(cur) || len(cur) != len(terms) {
			calm, terms = 0, cur
			continue
		}
		calm++
	}
	return terms
}

func (g *argoGate) terminationsOf(ns string) []correlate.Termination {
	var out []correlate.Termination
	for _, d := range g.ds {
		for _, term := range d.Terminations() {
			if term.Workload.Namespace == ns {
				out = append(out, term)
			}
		}
	}
	return out
}

func steady(pods []corev1.Pod, hash string) bool {
	if len(pods) != 2 {
		return false
	}
	for i := range pods {
		if pods[i].DeletionTimestamp != nil || pods[i].Labels[rolloutHashLabel] != hash || !isReady(&pods[i]) {
			return false
		}
	}
	return true
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func allComplete(terms []correlate.Termination) bool {
	for _, term := range terms {
		if !term.Complete {
			return false
		}
	}
	return true
}

// checkPrometheus: the gate's selection of both revisions, in the real
// Prometheus, holds what drainwatch counted (want) and the daemon's
// /metrics says.
func (g *argoGate) checkPrometheus(ctx context.Context, t *testing.T, ns, stable, canary string, want int) {
	t.Helper()
	sel := fmt.Sprintf(`namespace=%q, workload_kind="Rollout", workload="web", revision=~"%s|%s"`, ns, stable, canary)
	served := 0
	for _, d := range g.ds {
		served += int(counterSum(d, "drainwatch_connections_refused_after_sigterm_total", ns))
	}
	got, err := g.prom.QueryWhen(ctx, "sum(drainwatch_connections_refused_after_sigterm_total{"+sel+"}) or vector(0)",
		func(s []promtest.Sample) bool { return len(s) == 1 && int(s[0].Value) == want })
	if err != nil || served != want {
		t.Errorf("Prometheus: %v; the daemon's /metrics has %d; want %d", err, served, want)
		return
	}
	t.Logf("Prometheus: refused after the stop signal, revisions %s and %s: %v = the daemon's /metrics %d = the terminations' %d", stable, canary, got[0].Value, served, want)
}

// deployRollout creates the AnalysisTemplate and the Rollout of 2 naive
// servers (with lifecycle), waits until they are Ready and watched, and
// starts the router and the load.
func (g *argoGate) deployRollout(ctx context.Context, t *testing.T, ns string, lifecycle *corev1.Lifecycle) (*router.Router, func()) {
	t.Helper()
	if err := g.c.Apply(ctx, cluster.Namespace(ns), cluster.ServiceFor(ns, "web")); err != nil {
		t.Fatal(err)
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := g.c.Kubectl(ctx, "apply", "-n", ns, "-f", filepath.Join(root, "deploy", "gates", "argo-analysistemplate.yaml")); err != nil {
		t.Fatalf("applying the AnalysisTemplate: %v\n%s", err, out)
	}
	obj := rolloutObject(t, ns, g.prom.URL, lifecycle)
	if _, err := g.dyn.Resource(rolloutsGVR).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Rollout: %v", err)
	}
	g.waitRollout(ctx, t, ns, "healthy", func(ro *unstructured.Unstructured) bool { return str(ro, "status", "phase") == "Healthy" })
	pods := g.rolloutPods(ctx, t, ns)
	waitWatching(ctx, t, g.ds, pods)
	r, err := g.c.StartRouter(ctx, cluster.RouterConfig{Namespace: ns, Service: "web", Delay: argoLag, DialTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for len(r.Backends()) != 2 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	return r, g.startLoad(ctx, r.Addr())
}

// startLoad sends /work every 20 ms and /slow (2.5 s) every 250 ms: a
// naive server waits for its slow requests after closing its listener, so
// it refuses what the router still sends it instead of vanishing at once.
func (g *argoGate) startLoad(ctx context.Context, target string) func() {
	lctx, stop := context.WithCancel(ctx)
	loads := []client.Load{
		{Dial: g.c.Dial, Target: target, Path: "/work", Interval: 20 * time.Millisecond, Count: 6000, Duration: 2 * time.Minute, Timeout: time.Second},
		{Dial: g.c.Dial, Target: target, Path: "/slow?ms=2500", Interval: 250 * time.Millisecond, Count: 480, Duration: 2 * time.Minute, Timeout: 5 * time.Second},
	}
	done := make(chan struct{}, len(loads))
	for _, l := range loads {
		go func() { _, _ = l.Run(lctx); done <- struct{}{} }()
	}
	time.Sleep(time.Second)
	return func() {
		stop()
		for range loads {
			<-done
		}
	}
}

// rolloutPods are the Rollout's Ready pods.
func (g *argoGate) rolloutPods(ctx context.Context, t *testing.T, ns string) []corev1.Pod {
	t.Helper()
	pods, err := g.c.ReadyPods(ctx, ns, "app=web")
	if err != nil || len(pods) != 2 {
		t.Fatalf("ready pods %d, %v", len(pods), err)
	}
	return pods
}
