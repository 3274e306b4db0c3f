package e2e_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/drainwatch/drainwatch/collector/kernel"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/lab"
	"github.com/drainwatch/drainwatch/testenv/router"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// The daemon stops as soon as it has seen the first old pod's deletion and
// stays down for downFor. The pods' preStop sleep delays their stop signal
// by preStop, so the stop signal and the refusals (between the listener's
// close and the exit, which a request held open at the pod puts 1.5 s
// later) happen while nobody reads the ring buffer. The router follows the
// EndpointSlices routerDelay late, after the stop signal: the pods refuse.
//
// minReady spaces the old pods' terminations: the next old pod is deleted
// minReady after its replacement is ready, so only the first termination
// can overlap the downtime (downFor, plus the daemon's restart) and none
// starts or ends within a few hundred milliseconds of its edges, where the
// daemon's view of the gap and the node agent's could disagree.
const (
	downFor     = 2 * time.Second
	preStop     = 1
	routerDelay = 2 * time.Second
	minReady    = 4
)

// The floor of the refusals the first old pod must make while the daemon
// is down. A request held open at it from its deletion for restartHold
// keeps the naive server alive with its listener closed from its stop
// signal (the deletion + preStop, 1 s) to 2.5 s after the deletion; the
// router keeps sending to it until routerDelay after the endpoint's
// removal, about 2 s after the deletion, and the daemon is down from just
// after the deletion to downFor later: about 1 s of refusals inside the
// downtime. The router spreads startLoad's 120 connections/s round-robin
// over at most 5 backends (4 old, 1 surge): 24/s, 24 refusals in that
// second. The floor is half of that, for a loaded machine's late stop
// signal; the open-loop load sends late ticks at once, it skips none.
const (
	restartHold         = 2500 * time.Millisecond
	restartRefusedFloor = 12
)

// TestRolloutWithDaemonRestart rolls out a naive Deployment of 4 pods with
// a preStop sleep of 1 s behind a router that follows EndpointSlices 2 s
// late (each old pod refuses what the router still sends it after its stop
// signal), and stops the daemon (orderly, as on SIGTERM) as soon as it has
// seen the first old pod's deletion, for downFor, then starts it again on
// the same state dir.
//
// pinned: the BPF programs stayed attached and the ring buffer kept the
// refusals of the downtime, so every termination is exact and none is
// partial; the totals equal the router's records (it is the client of the
// pods). unpinned: the kernel view has a hole, exactly the terminations
// overlapping it (by the node agent's record) are partial (daemon_down) and
// never count more than the router saw; every other one is exact.
func TestRolloutWithDaemonRestart(t *testing.T) {
	t.Run("pinned", func(t *testing.T) { testRolloutRestart(t, true) })
	t.Run("unpinned", func(t *testing.T) { testRolloutRestart(t, false) })
}

func testRolloutRestart(t *testing.T, pinned bool) {
	c, ds := startCluster(t, "e2r-", 1)
	if pinned {
		pinPath := filepath.Join("/sys/fs/bpf", "drainwatch-e2e-"+rand.String(6))
		// Registered before the daemon's stop, so it runs after it.
		t.Cleanup(func() {
			if err := kernel.RemovePins(pinPath); err != nil {
				t.Error(err)
			}
		})
		ds[0].stop()
		ds[0] = startDaemonPinned(t, c.RestConfig, ds[0].node, t.TempDir(), pinPath)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := unique("e2e-rollout-restart")
	dep := cluster.ServerDeployment(ns, "web", workload.ModeNaive, 4)
	dep.Spec.Template.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: preStop}}}
	// One pod at a time, minReady apart: the restart overlaps one termination.
	dep.Spec.MinReadySeconds = minReady
	dep.Spec.Strategy = oneAtATime()
	old := deploy(ctx, t, c, ns, dep)
	waitWatching(ctx, t, ds, old)
	r, loadDone, first, held := restartUnderLoad(ctx, t, c, ns, old)
	addr := cluster.PodAddr(first, cluster.ServerPort)
	waitDeletionSeen(ctx, t, ds[0], string(first.UID)) // the termination has begun
	ds[0].stop()
	down := time.Now()
	time.Sleep(downFor)
	up := time.Now()
	ds[0] = startDaemonPinned(t, c.RestConfig, ds[0].node, ds[0].stateDir, ds[0].pinPath)
	if _, err := c.WaitRolledOut(ctx, ns, "web"); err != nil {
		t.Fatal(err)
	}
	reqs := <-loadDone
	during := overlappingDowntime(ctx, t, c, old, first, down, up)
	if pinned {
		during = nil // the kernel side kept collecting: nothing was missed
	}
	checkHeld(t, first.Name, <-held)
	requireRefusedInWindow(t, r, addr, "while the daemon was down", down, up, restartRefusedFloor)
	checkRollout(ctx, t, ds[0], r, old, reqs, during)
	logTimeline(t, ds[0], r, first, down, up)
	// The scenario is only a proof if the kernel side of the termination
	// happened while no daemon was reading.
	if got, _ := ds[0].Get(string(first.UID)); pinned && (got.Marks.StopSignal.Before(down) || got.Marks.StopSignal.After(up)) {
		t.Errorf("%s: stop signal at %v, not while the daemon was down (%v to %v): the restart did not overlap it",
			first.Name, got.Marks.StopSignal, down, up)
	}
}

// restartUnderLoad routes the load through a router that follows the
// EndpointSlices of web (its 4 pods, old) routerDelay late, then starts
// `kubectl rollout restart` and returns once its first pod is deleting,
// with a request held open at that pod for restartHold (see
// restartRefusedFloor).
func restartUnderLoad(ctx context.Context, t *testing.T, c *cluster.Cluster, ns string, old []corev1Pod) (*router.Router, <-chan []client.Request, *corev1Pod, <-chan client.Request) {
	t.Helper()
	r, err := c.StartRouter(ctx, cluster.RouterConfig{Namespace: ns, Service: "web", Delay: routerDelay})
	if err != nil {
		t.Fatal(err)
	}
	for len(r.Backends()) != 4 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	loadDone := startLoad(ctx, c, r)
	time.Sleep(500 * time.Millisecond)
	if _, err := c.Kubectl(ctx, "-n", ns, "rollout", "restart", "deployment/web"); err != nil {
		t.Fatal(err)
	}
	first := waitAnyDeleting(ctx, t, c, ns, old)
	return r, loadDone, first, holdRequest(ctx, c, cluster.PodAddr(first, cluster.ServerPort), restartHold)
}

// startLoad sends /work every 10 ms and, so that each old pod has a
// request in flight at its stop signal (the naive server then waits for it
// with its listener closed, refusing what the router still sends), a 400 ms
// /slow every 50 ms, for 30 s; the channel delivers both loads' records.
func startLoad(ctx context.Context, c *cluster.Cluster, r *router.Router) <-chan []client.Request {
	return startLoadFor(ctx, c, r.Addr(), 30*time.Second)
}

// startLoadFor is startLoad's load to target for d, or until ctx ends.
func startLoadFor(ctx context.Context, c *cluster.Cluster, target string, d time.Duration) <-chan []client.Request {
	loads := []client.Load{
		{Dial: c.Dial, Target: target, Path: "/work", Interval: 10 * time.Millisecond, Count: int(d / (10 * time.Millisecond)), Duration: d},
		{Dial: c.Dial, Target: target, Path: "/slow?ms=400", Interval: 50 * time.Millisecond, Count: int(d / (50 * time.Millisecond)), Duration: d},
	}
	done := make(chan []client.Request, len(loads))
	for _, l := range loads {
		go func() { reqs, _ := l.Run(ctx); done <- reqs }()
	}
	all := make(chan []client.Request, 1)
	go func() {
		var reqs []client.Request
		for range loads {
			reqs = append(reqs, <-done...)
		}
		all <- reqs
	}()
	return all
}

// oneAtATime is a rolling update that replaces one pod at a time.
func oneAtATime() appsv1.DeploymentStrategy {
	return appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
}

// waitAnyDeleting waits until one of pods has a deletionTimestamp and
// returns it.
func waitAnyDeleting(ctx context.Context, t *testing.T, c *cluster.Cluster, ns string, pods []corev1Pod) *corev1Pod {
	t.Helper()
	var deleting *corev1Pod
	err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for i, p := range pods {
			got, err := c.Client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil || got.DeletionTimestamp != nil {
				deleting = &pods[i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no old pod deleted by the rollout: %v", err)
	}
	return deleting
}

// waitDeletionSeen waits until the daemon has the pod's deletion_seen mark.
func waitDeletionSeen(ctx context.Context, t *testing.T, d *nodeDaemon, uid string) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(context.Context) (bool, error) {
		got, ok := d.Get(uid)
		return ok && !got.Marks.DeletionSeen.IsZero(), nil
	})
	if err != nil {
		t.Fatalf("the daemon never saw the deletion of %s: %v", uid, err)
	}
}

// routerRefusedBetween counts the router's connections to addr refused
// that it accepted from its client within [from, to].
func routerRefusedBetween(r *router.Router, addr string, from, to time.Time) int {
	n := 0
	for _, cn := range r.Conns() {
		if cn.Backend == addr && cn.Outcome == router.Refused && !cn.Accepted.Before(from) && !cn.Accepted.After(to) {
			n++
		}
	}
	return n
}

// checkRollout compares each old pod's termination with the router's
// records. Exactly the terminations in partial are partial, with
// daemon_down, and never count more than the router saw; every other one
// is complete and exact.
func checkRollout(ctx context.Context, t *testing.T, d *nodeDaemon, r *router.Router, old []corev1Pod, reqs []client.Request, partial map[types.UID]bool) {
	t.Helper()
	byBackend := lossByBackend(r.Conns())
	total, exact, daemonTotal := 0, 0, 0
	for i := range old {
		p := &old[i]
		got := waitComplete(ctx, t, d, string(p.UID))
		loss := byBackend[cluster.PodAddr(p, cluster.ServerPort)]
		want := loss.refused
		n := got.Counts.RefusedAfterSigterm + got.Counts.RefusedBeforeSigterm
		total += want
		daemonTotal += n
		bh := loss.blackholed
		t.Logf("%s: router refused %d and failed otherwise %d, drainwatch %d (after %d, before %d) and blackholed %d, partial %v, diagnoses %v",
			p.Name, want, bh, n, got.Counts.RefusedAfterSigterm, got.Counts.RefusedBeforeSigterm, got.Counts.ConnectionsBlackholed, got.PartialReasons, codes(got))
		if b := got.Counts.ConnectionsBlackholed; b > bh || (!partial[p.UID] && b != bh) {
			t.Errorf("%s: drainwatch blackholed %d, the router's dials that failed without a refusal %d (partial %v)", p.Name, b, bh, got.PartialReasons)
			dumpBlackholes(t, got, r, cluster.PodAddr(p, cluster.ServerPort))
		}
		if !checkOne(t, p, got, n, want, partial[p.UID]) {
			dumpRouter(t, got, r, cluster.PodAddr(p, cluster.ServerPort))
		}
		if !got.Partial {
			exact++
		}
	}
	t.Logf("rollout of 4 pods with a daemon restart: router refused %d in all (client saw %s), drainwatch %d; %d of 4 terminations exact, %d partial",
		total, client.Summarize(reqs), daemonTotal, exact, len(old)-exact)
	if len(partial) == 0 && daemonTotal != total {
		t.Errorf("drainwatch counted %d refused in all, the router %d", daemonTotal, total)
	}
	if n := len(d.Terminations()); n != len(old) {
		t.Errorf("daemon lists %d terminations, want %d (one per old pod)", n, len(old))
	}
	if got := terminationsTotal(d); got != float64(len(old)) {
		t.Errorf("drainwatch_terminations_total = %v after the restart, want %d", got, len(old))
	}
}

// checkOne checks one old pod's termination: partial (daemon_down, counted
// at most what the router saw) exactly when wantPartial, else exact (its
// counts; partial with api_unreachable alone when an API mark is unknown).
func checkOne(t *testing.T, p *corev1Pod, got correlate.Termination, n, want int, wantPartial bool) bool {
	t.Helper()
	switch {
	case !wantPartial && slices.Equal(got.PartialReasons, []string{correlate.PartialAPIBlind}):
		// Only an API-side mark unknown (an API-server outage): the kernel
		// side is whole and its counts exact.
		if n != want {
			t.Errorf("%s: drainwatch counted %d refused, the router saw %d", p.Name, n, want)
			return false
		}
		return true
	case got.Partial != wantPartial:
		t.Errorf("%s: partial %v %v, want %v (its termination overlaps the daemon's downtime: %v)",
			p.Name, got.Partial, got.PartialReasons, wantPartial, wantPartial)
	case !got.Partial && n != want:
		t.Errorf("%s: drainwatch counted %d refused, the router saw %d", p.Name, n, want)
	case got.Partial && !slices.Contains(got.PartialReasons, "daemon_down"):
		t.Errorf("%s: partial %v, want daemon_down among the reasons", p.Name, got.PartialReasons)
	case got.Partial && n > want:
		t.Errorf("%s: partial, yet counted %d > %d the router saw: counted twice", p.Name, n, want)
	default:
		return true
	}
	return false
}

// overlappingDowntime returns the old pods whose termination, as the node
// agent ran it (from its Killing event to the container's exit), overlaps
// the daemon's downtime [down, up]. The first deleted pod must be one of
// them, or the scenario proves nothing.
func overlappingDowntime(ctx context.Context, t *testing.T, c *cluster.Cluster, old []corev1Pod, first *corev1Pod, down, up time.Time) map[types.UID]bool {
	t.Helper()
	out := map[types.UID]bool{}
	for i := range old {
		term, err := c.WaitTerminated(ctx, old[i].UID)
		if err != nil {
			t.Fatal(err)
		}
		if !term.Killing.After(up) && !term.ExitAt.Before(down) {
			out[old[i].UID] = true
		}
		t.Logf("%s: killing %v, exit %v relative to the daemon's stop (up again at %v)",
			old[i].Name, term.Killing.Sub(down), term.ExitAt.Sub(down), up.Sub(down))
	}
	if !out[first.UID] {
		t.Fatalf("%s: its termination does not overlap the daemon's downtime: the restart did not overlap it", first.Name)
	}
	return out
}

// logTimeline shows, relative to the daemon's stop, when the pod's marks
// and the router's refusals happened: why the restart missed them.
func logTimeline(t *testing.T, d *nodeDaemon, r *router.Router, p *corev1Pod, down, up time.Time) {
	t.Helper()
	addr := cluster.PodAddr(p, cluster.ServerPort)
	var refused []string
	for _, cn := range r.Conns() {
		if cn.Backend == addr && cn.Outcome == router.Refused {
			refused = append(refused, cn.Accepted.Sub(down).String())
		}
	}
	got, _ := d.Get(string(p.UID))
	m := got.Marks
	rel := func(at time.Time) string {
		if at.IsZero() {
			return "-"
		}
		return at.Sub(down).String()
	}
	t.Logf("relative to the stop (up again at %v): refused %v; deletion_seen %s stop_signal %s listener_closed %s exit %s pod_gone %s",
		up.Sub(down), refused, rel(m.DeletionSeen), rel(m.StopSignal), rel(m.ListenerClosed), rel(m.Exit), rel(m.PodGone))
}

// backendLoss is what the router met at one pod's address: dials refused,
// dials that failed otherwise (blackholed: lab.BlackholedByBackend) and
// connections the pod reset or closed unanswered (lab.ResetByBackend).
type backendLoss struct{ refused, blackholed, resets int }

// lossByBackend tallies the router's records by backend address (the node
// agent allocates addresses round-robin: a test's few pods never share
// one).
func lossByBackend(conns []router.Conn) map[string]backendLoss {
	out := map[string]backendLoss{}
	for _, c := range conns {
		l := out[c.Backend]
		switch {
		case c.Outcome == router.Refused:
			l.refused++
		case lab.BlackholedByBackend(c):
			l.blackholed++
		case lab.ResetByBackend(c):
			l.resets++
		}
		out[c.Backend] = l
	}
	return out
}

// lossTo sums lossByBackend over the pods.
func lossTo(conns []router.Conn, pods []corev1.Pod) backendLoss {
	by := lossByBackend(conns)
	var sum backendLoss
	for i := range pods {
		l := by[cluster.PodAddr(&pods[i], cluster.ServerPort)]
		sum.refused, sum.blackholed, sum.resets = sum.refused+l.refused, sum.blackholed+l.blackholed, sum.resets+l.resets
	}
	return sum
}
