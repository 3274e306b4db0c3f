package e2e_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
	"github.com/drainwatch/drainwatch/testenv/lab"
	"github.com/drainwatch/drainwatch/testenv/node"
	"github.com/drainwatch/drainwatch/testenv/router"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// apiFrozenFor is how long TestAPIServerFrozen freezes the API server.
const apiFrozenFor = 15 * time.Second

// TestAPIServerFrozen runs the seeds' experiment straight at a naive pod
// with a 2 s preStop sleep, and freezes the API server (SIGSTOP) for 15 s
// as soon as the daemon has seen the pod's deletion and its Killing Event:
// the stop signal, the refusals and the exit all happen while no API
// request is answered (the pod's status and its final delete wait for the
// thaw). The kernel side needs no API server: drainwatch counts exactly
// the refusals the clients saw, and the termination completes after the
// thaw, neither partial nor counted twice.
//
// The preStop sleep is 2 s, clear of the 1 s --min-drain-delay: with 1 s,
// the listener closes right at the no_drain_delay threshold, and
// drainwatch measures it from when it saw the deletion (16 ms after the
// delete, in one run: "closed 0.99s after the deletion" where the listener
// closed 1.005 s after the delete), so whether that Event is owed would be
// decided by jitter, not by the scenario.
func TestAPIServerFrozen(t *testing.T) {
	c, ds := startCluster(t, "e2f-", 1)
	cp := cptest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := unique("e2e-apifrozen")
	dep := cluster.ServerDeployment(ns, "web", workload.ModeNaive, 1)
	dep.Spec.Template.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 2}}}
	pods := deploy(ctx, t, c, ns, dep)
	waitWatching(ctx, t, ds, pods)
	victim, d := &pods[0], ds[0]
	addr := cluster.PodAddr(victim, cluster.ServerPort)
	thawed := make(chan error, 1)
	var frozenAt time.Time
	// The clients keep sending for 4 s: past the preStop sleep and the
	// 3 s /slow the naive server waits for before it exits.
	seeds := client.Seeds{Dial: c.Dial, Target: addr, Pod: addr, Window: 4 * time.Second, SlowMs: 3000, Stop: func(ctx context.Context) error {
		if err := c.DeletePod(ctx, victim.Namespace, victim.Name); err != nil {
			return err
		}
		waitAPISideSeen(ctx, t, d, victim, false)
		frozenAt = time.Now()
		go func() { thawed <- cp.FreezeAPIServer(context.WithoutCancel(ctx), apiFrozenFor) }()
		return nil
	}}
	res, err := seeds.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-thawed; err != nil {
		t.Fatal(err)
	}
	got := waitComplete(ctx, t, d, string(victim.UID))
	want := lab.RefusedTo(addr, res.Work, res.Readiness, []client.Request{res.Slow})
	t.Logf("API server frozen %v from %v after the delete; clients refused %d (work %s); drainwatch %+v, partial %v",
		apiFrozenFor, frozenAt.Sub(res.StopAt), want, client.Summarize(res.Work), got.Counts, got.PartialReasons)
	logMarks(t, got.Marks, frozenAt)
	if got.Marks.StopSignal.Before(frozenAt) || got.Marks.Exit.After(frozenAt.Add(apiFrozenFor)) {
		t.Errorf("stop signal and exit not within the freeze: the scenario proves nothing")
	}
	probes, err := c.ProbeRefusals(victim, res.StopAt)
	if err != nil {
		t.Fatal(err)
	}
	assertSeedsRefusals(t, got, res, want, probes)
	assertOnce(t, d, got, 1)
	term, err := c.WaitTerminated(ctx, victim.UID)
	if err != nil {
		t.Fatal(err)
	}
	death := lab.Death{SIGKILL: term.SIGKILLAt, Exit: term.ExitAt}
	resets := lab.ResetAtShutdownTo(addr, death, res.Work, res.Readiness, []client.Request{res.Slow})
	blackholed := lab.BlackholedTo(addr, res.Work, res.Readiness, []client.Request{res.Slow})
	checkEvents(ctx, t, c, d, ns, map[types.UID]map[string]int{victim.UID: owedEvents(t, term, want, resets, blackholed)})
}

// logMarks logs a termination's marks relative to a fault's start.
func logMarks(t *testing.T, m correlate.Marks, from time.Time) {
	t.Helper()
	rel := func(at time.Time) string {
		if at.IsZero() {
			return "-"
		}
		return at.Sub(from).Round(time.Millisecond).String()
	}
	t.Logf("marks relative to the fault: deletion_seen %s killing %s endpoints_not_ready %s stop_signal %s listener_closed %s exit %s pod_gone %s",
		rel(m.DeletionSeen), rel(m.Killing), rel(m.EndpointsNotReady), rel(m.StopSignal), rel(m.ListenerClosed), rel(m.Exit), rel(m.PodGone))
}

// assertOnce checks a termination is exact and whole (complete, not
// partial) and that the daemon recorded as many terminations as happened.
func assertOnce(t *testing.T, d *nodeDaemon, got correlate.Termination, terminations int) {
	t.Helper()
	if !got.Complete || got.Partial {
		t.Errorf("termination complete %v partial %v %v, want complete and exact", got.Complete, got.Partial, got.PartialReasons)
	}
	if n := len(d.Terminations()); n != terminations {
		t.Errorf("daemon lists %d terminations, want %d", n, terminations)
	}
	if n := terminationsTotal(d); n != float64(terminations) {
		t.Errorf("drainwatch_terminations_total = %v, want %d", n, terminations)
	}
}

// twoAtATime is a rolling update that deletes two old pods at once and
// creates their replacements only then (no surge).
func twoAtATime() appsv1.DeploymentStrategy {
	s := oneAtATime()
	s.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(0))
	s.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	return s
}

// waitDeleting waits until n of pods have a deletionTimestamp and returns them.
func waitDeleting(ctx context.Context, t *testing.T, c *cluster.Cluster, pods []corev1Pod, n int) []*corev1Pod {
	t.Helper()
	var deleting []*corev1Pod
	err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		deleting = deleting[:0]
		for i, p := range pods {
			got, err := c.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil || got.DeletionTimestamp != nil {
				deleting = append(deleting, &pods[i])
			}
		}
		return len(deleting) >= n, nil
	})
	if err != nil {
		t.Fatalf("%d old pods not deleted by the rollout: %v", n, err)
	}
	return deleting
}

// The outage of TestAPIServerOutage: the API server is stopped once the
// first two old pods' terminations have begun and everything the API says
// about them has reached the daemon (deletion, Killing, endpoint not
// ready), and stays down apiDownFor. Their preStop sleep (outagePreStop)
// puts the stop signal, the refusals and the exit inside the outage, with
// seconds to spare on a loaded machine; the router, which learnt of the
// endpoints' removal before the outage, keeps sending to them
// outageRouterDelay after it, past the stop signal.
const (
	apiDownFor        = 30 * time.Second
	outagePreStop     = 15
	outageRouterDelay = 19 * time.Second
	// outageLoadFor bounds the load: the rollout, the outage, the API
	// server's stop and start and the daemon's catching up take about
	// 2 minutes; the test ends the load once the rollout is done.
	outageLoadFor = 200 * time.Second
	// outageHold: a request held open at each of the first two pods from
	// its deletion keeps the naive server alive with its listener closed
	// from its stop signal (outagePreStop after the Killing) until 2 s
	// later, inside the outage, while the router still sends to it (until
	// outageRouterDelay after the endpoint's removal, 4 s past the stop
	// signal).
	outageHold = (outagePreStop + 2) * time.Second
	// outageRefusedFloor is the least each of the first two pods must
	// refuse during the outage: the router spreads startLoad's 120
	// connections/s round-robin over the 4 old pods (it learns of the new
	// ones outageRouterDelay late), 30/s each, 60 in the held 2 s; the
	// floor is half of that, for a loaded machine's late stop signal.
	outageRefusedFloor = 30
)

// TestAPIServerOutage rolls out a naive Deployment of 4 pods two at a time
// behind a router and stops the API server (as an upgrade does: SIGTERM,
// connections refused) for 30 s while the first two old pods terminate.
// While it is down the daemon's watches fail and retry with backoff, the
// node agent cannot report the exits nor delete the pods; the kernel side
// keeps counting. Once it is back, every watch relists (the restarted API
// server's watch cache is newer than any resourceVersion the daemon had)
// and the node agent deletes the two pods.
//
// The rollout is paused over the outage and resumed once the daemon has
// caught up (both terminations complete, its slice watch relisted): its
// watches resume on client-go's backoff, up to a minute after the API
// server is back, and a termination that begins before they do is seen
// late from the API side (then partial, accept_history_overflow, when its
// accepts outran the log; the refusals stay exact). That case is not this
// test's: here every expectation is exact.
//
// A request held open at each of the first two pods keeps it refusing for
// 2 s inside the outage: each must refuse at least outageRefusedFloor
// then, or the outage proved nothing.
//
// Expected, exactly: 4 terminations, each complete with exact counts; the
// last two exact, the first two exact too (their API side was seen before
// the outage and cannot change while it is down) except pod_gone: the
// kernel's netns destruction sets it exactly; if only the pod watch
// catching up saw the pod go, it is unknown and the termination partial
// with api_unreachable alone; refusals equal to the
// router's per pod; drainwatch_terminations_total 4 (the relists count
// nothing twice); every Warning Event posted once, none dropped; the
// daemon healthy throughout (the outage is far below daemon.APIFailingFor).
func TestAPIServerOutage(t *testing.T) {
	c, ds := startCluster(t, "e2o-", 1)
	cp, d := cptest.Get(t), ds[0]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := unique("e2e-apioutage")
	dep := cluster.ServerDeployment(ns, "web", workload.ModeNaive, 4)
	dep.Spec.Template.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: outagePreStop}}}
	dep.Spec.Strategy = twoAtATime()
	old := deploy(ctx, t, c, ns, dep)
	waitWatching(ctx, t, ds, old)
	r, err := c.StartRouter(ctx, cluster.RouterConfig{Namespace: ns, Service: "web", Delay: outageRouterDelay})
	if err != nil {
		t.Fatal(err)
	}
	for len(r.Backends()) != 4 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := startLoadFor(loadCtx, c, r.Addr(), outageLoadFor)
	time.Sleep(500 * time.Millisecond)
	if _, err := c.Kubectl(ctx, "-n", ns, "rollout", "restart", "deployment/web"); err != nil {
		t.Fatal(err)
	}
	first := waitDeleting(ctx, t, c, old, 2)
	var held []<-chan client.Request
	for _, p := range first {
		held = append(held, holdRequest(ctx, c, cluster.PodAddr(p, cluster.ServerPort), outageHold))
	}
	if _, err := c.Kubectl(ctx, "-n", ns, "rollout", "pause", "deployment/web"); err != nil {
		t.Fatal(err)
	}
	for _, p := range first {
		waitAPISideSeen(ctx, t, d, p, true)
	}
	// kube-apiserver stops listening within milliseconds of SIGTERM (its
	// log: "Stopped listening"), then ends its requests before it exits.
	down := time.Now()
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	exited := time.Now()
	healthy := watchHealthy(ctx, d, apiDownFor-exited.Sub(down))
	up, slicesAtUp := time.Now(), d.KubeStats().SliceEvents
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	ready := time.Now()
	t.Logf("API server SIGTERM at 0, exited at %v, started again at %v, ready at %v; daemon healthy throughout: %v; watch stats %+v",
		exited.Sub(down), up.Sub(down), ready.Sub(down), healthy, d.KubeStats())
	if !healthy {
		t.Errorf("/healthz failed during a %v API-server outage", apiDownFor)
	}
	waitCaughtUp(ctx, t, d, first, slicesAtUp)
	// Past the collector's catch-up window (2 s after a watch opens again):
	// the next pods' endpoint changes are then dated, not api_unreachable.
	time.Sleep(3 * time.Second)
	if _, err := c.Kubectl(ctx, "-n", ns, "rollout", "resume", "deployment/web"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitRolledOut(ctx, ns, "web"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(outageRouterDelay) // the last old pod's refusals
	stopLoad()
	reqs := <-loadDone
	for i, p := range first {
		checkHeld(t, p.Name, <-held[i])
		requireRefusedInWindow(t, r, cluster.PodAddr(p, cluster.ServerPort), "during the API-server outage", down, up, outageRefusedFloor)
		got := waitComplete(ctx, t, d, string(p.UID))
		logTimeline(t, d, r, p, down, up)
		logMarks(t, got.Marks, down)
		// up, not ready: the API server answers nothing before it listens.
		if got.Marks.StopSignal.Before(down) || got.Marks.Exit.After(up) {
			t.Errorf("%s: stop signal %v, exit %v, not within the outage: the scenario proves nothing",
				p.Name, got.Marks.StopSignal.Sub(down), got.Marks.Exit.Sub(down))
		}
		// pod_gone: the kernel's netns destruction, exact, or unknown with
		// api_unreachable when only the pod watch catching up saw it go.
		blind := slices.Equal(got.PartialReasons, []string{correlate.PartialAPIBlind})
		if got.Marks.PodGone.IsZero() != blind || (got.Partial && !blind) {
			t.Errorf("%s: pod_gone %v, partial %v: want exact, or unknown with %s alone",
				p.Name, got.Marks.PodGone, got.PartialReasons, correlate.PartialAPIBlind)
		}
	}
	checkRollout(ctx, t, d, r, old, reqs, nil)
	checkEvents(ctx, t, c, d, ns, owedByRouter(ctx, t, c, r, old))
}

// waitCaughtUp waits until the daemon's watches are back after an outage:
// the pods deleted meanwhile have completed terminations (the pod watch
// delivered their deletion) and slice events arrived past slicesBefore
// (the slice watch relisted).
func waitCaughtUp(ctx context.Context, t *testing.T, d *nodeDaemon, pods []*corev1Pod, slicesBefore uint64) {
	t.Helper()
	for _, p := range pods {
		waitComplete(ctx, t, d, string(p.UID))
	}
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return d.KubeStats().SliceEvents > slicesBefore, nil
	})
	if err != nil {
		t.Fatalf("the daemon's slice watch never came back: %v", err)
	}
}

// waitAPISideSeen waits until the daemon has the API-side marks of a
// pod's termination that precede its stop signal: deletion_seen and
// killing, and endpoints_not_ready when endpoints (it is behind a Service).
func waitAPISideSeen(ctx context.Context, t *testing.T, d *nodeDaemon, p *corev1Pod, endpoints bool) {
	t.Helper()
	var m correlate.Marks
	err := wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(context.Context) (bool, error) {
		got, _ := d.Get(string(p.UID))
		m = got.Marks
		return !m.DeletionSeen.IsZero() && !m.Killing.IsZero() && (!endpoints || !m.EndpointsNotReady.IsZero()), nil
	})
	if err != nil {
		t.Fatalf("%s: the daemon did not see the API side of its termination (marks %+v): %v", p.Name, m, err)
	}
}

// watchHealthy checks the daemon's /healthz every 500 ms for d and reports
// whether it passed every time.
func watchHealthy(ctx context.Context, nd *nodeDaemon, d time.Duration) bool {
	ok := true
	end := time.Now().Add(d)
	for time.Now().Before(end) && ctx.Err() == nil {
		if err := nd.Healthy(); err != nil {
			ok = false
		}
		time.Sleep(500 * time.Millisecond)
	}
	return ok
}

// checkEvents checks that drainwatch posted exactly the Warning Events
// owed (pod UID → Event reason → count, from ground truth: see
// owedEvents), none twice, and that drainwatch_events_dropped_total stayed
// 0: the faults were shorter than the Events' retry bound.
func checkEvents(ctx context.Context, t *testing.T, c *cluster.Cluster, d *nodeDaemon, ns string, owed map[types.UID]map[string]int) {
	t.Helper()
	maps.DeleteFunc(owed, func(_ types.UID, m map[string]int) bool { return len(m) == 0 })
	posted := map[types.UID]map[string]int{}
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		clear(posted)
		for _, ev := range list.Items {
			if ev.Source.Component == exporter.EventComponent && ev.InvolvedObject.Kind == "Pod" {
				if posted[ev.InvolvedObject.UID] == nil {
					posted[ev.InvolvedObject.UID] = map[string]int{}
				}
				posted[ev.InvolvedObject.UID][ev.Reason] += int(max(ev.Count, 1))
			}
		}
		return maps.EqualFunc(posted, owed, maps.Equal), nil
	})
	if err != nil {
		t.Errorf("drainwatch's Events per pod %v, owed %v: %v", posted, owed, err)
	}
	if n := droppedEvents(d); n != 0 {
		t.Errorf("drainwatch_events_dropped_total = %v, want 0", n)
	}
}

// owedEvents is the Warning Events (reason → count) a naive server's
// termination owes, from ground truth only: the node agent's record of
// the kill (term) and what the pod's clients saw (refused, reset at
// shutdown by a live server, connects that failed without a refusal),
// never from drainwatch's diagnoses. It covers
// the scenarios of this file: a server that exits at its stop signal once
// its requests are answered, within the grace period (no SIGKILL), behind
// a Service, with clients that do not reuse connections; other Events
// (stop signal ignored or mismatched, streams, reuse, restarts) cannot be
// owed there.
func owedEvents(t *testing.T, term node.Termination, refused, resets, blackholed int) map[string]int {
	t.Helper()
	t.Logf("%s, the node agent's record: stop signal %v after the Killing, exit %v after it, grace %d s, preStop error %q; clients: %d refused, %d reset at shutdown",
		term.Pod, term.StopSignalAt.Sub(term.Killing), term.ExitAt.Sub(term.Killing), term.Grace, term.PreStopErr, refused, resets)
	if !term.SIGKILLAt.IsZero() {
		t.Fatalf("%s: SIGKILL at %v: owedEvents covers servers that exit within the grace", term.Pod, term.SIGKILLAt)
	}
	owed := map[string]int{}
	if refused > 0 { // listener_closed_before_routing_converged
		owed["DrainRefusedConnections"]++
	}
	// no_drain_delay: the listener (closed at the stop signal) less than
	// 1 s (the default --min-drain-delay) after the deletion, which comes
	// before the Killing.
	if term.StopSignalAt.Sub(term.Killing) < time.Second {
		owed["DrainNoDelay"]++
	}
	if resets > 0 { // connections_reset_at_shutdown
		owed["DrainShutdownResets"]++
	}
	if blackholed > 0 { // connections_blackholed
		owed["DrainBlackholedConnections"]++
	}
	if term.PreStopErr != "" {
		owed["DrainPrestopFailed"]++
	}
	// budget_too_small: preStop + drain + the 1 s margin beyond the grace.
	if term.ExitAt.Sub(term.Killing)+time.Second > time.Duration(term.Grace)*time.Second {
		owed["DrainBudgetTooSmall"]++
	}
	return owed
}

// owedByRouter is owedEvents for pods whose clients went through r: the
// router's connections to each, refused and reset by the pod, and its
// dials that failed otherwise (the pod's network gone).
func owedByRouter(ctx context.Context, t *testing.T, c *cluster.Cluster, r *router.Router, pods []corev1Pod) map[types.UID]map[string]int {
	t.Helper()
	owed := map[types.UID]map[string]int{}
	for i := range pods {
		p := &pods[i]
		term, err := c.WaitTerminated(ctx, p.UID)
		if err != nil {
			t.Fatal(err)
		}
		l := lossByBackend(r.Conns())[cluster.PodAddr(p, cluster.ServerPort)]
		owed[p.UID] = owedEvents(t, term, l.refused, l.resets, l.blackholed)
	}
	return owed
}

// droppedEvents sums drainwatch_events_dropped_total over its reasons.
func droppedEvents(d *nodeDaemon) float64 {
	mfs, err := d.Metrics().Registry().Gather()
	if err != nil {
		return -1
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "drainwatch_events_dropped_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}
