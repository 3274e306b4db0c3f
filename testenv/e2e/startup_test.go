package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// startupWindow is the daemons' --startup-window in these tests: long
// enough for the scenario's clients, short enough to wait for.
const startupWindow = 8 * time.Second

// Startup scenario: a tcpSocket readiness probe on a health port that
// listens at once (the probe's first run 3 s after the start), the traffic
// port only 5 s after the start.
const (
	healthPort       = 8081
	startupProbeWait = 3 // seconds: the readiness probe's initialDelaySeconds
	startupListen    = 5 * time.Second
	attemptEvery     = 25 * time.Millisecond
	startupClients   = 3
	// boundaryMargin: no client attempt is within this of the daemon's
	// Ready mark, so each client knows on which side of it it was.
	boundaryMargin = 100 * time.Millisecond
)

// attempt is one client's connection attempt: when it was sent, when the
// connect returned, and whether it was refused or accepted.
type attempt struct {
	sent, done time.Time
	refused    bool
	accepted   bool
}

// TestReadyBeforeListening: the new pod whose readiness passes
// before it serves. Independent clients connect straight at the pod's
// traffic port from its first moments, each counting its own refusals;
// they pause from 1.5 s after the health port opened (the probe cannot
// pass before 3 s) until 200 ms after both the test and the daemon saw the
// pod Ready, so no attempt is within 100 ms of the daemon's Ready mark
// (checked). drainwatch's refused_before_ready and refused_after_ready
// equal the clients' refusals sent before and after that mark, and its
// first accept lies within the first accepted client's connect.
func TestReadyBeforeListening(t *testing.T) {
	c, ds := startCluster(t, "e2st-", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := unique("e2e-startup")
	dep := cluster.ServerDeployment(ns, "web", workload.ModeNaive, 1,
		fmt.Sprintf("--health-port=%d", healthPort), "--listen-after="+startupListen.String())
	dep.Spec.Template.Spec.Containers[0].ReadinessProbe = &corev1.Probe{InitialDelaySeconds: startupProbeWait, PeriodSeconds: 1,
		ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(healthPort)}}}
	if err := c.Apply(ctx, cluster.Namespace(ns), dep); err != nil {
		t.Fatal(err)
	}
	pod := waitPodAddressed(ctx, t, c, ns)
	d := ds[0]
	waitWatching(ctx, t, ds, []corev1.Pod{pod})

	run := startupRun{c: c, d: d, pod: pod}
	run.clients(ctx, t)
	got := waitStartup(ctx, t, d, string(pod.UID))
	run.check(t, got)
}

// startupRun is the scenario's clients and what they saw.
type startupRun struct {
	c        *cluster.Cluster
	d        *nodeDaemon
	pod      corev1.Pod
	mu       sync.Mutex
	paused   bool
	attempts [startupClients][]attempt
	pauseAt  time.Time
	resumeAt time.Time
}

// clients runs the clients until each has been accepted for a second (or
// the bounds end), pausing around Ready.
func (r *startupRun) clients(ctx context.Context, t *testing.T) {
	t.Helper()
	lctx, stop := context.WithTimeout(ctx, 40*time.Second)
	defer stop()
	addr := cluster.PodAddr(&r.pod, cluster.ServerPort)
	var wg sync.WaitGroup
	for i := range startupClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.attempts[i] = r.client(lctx, addr)
		}()
	}
	r.pauseAroundReady(lctx, t)
	wg.Wait()
}

// client attempts a connection every attemptEvery (none while paused) and
// closes each accepted one at once, until a second after its first accept.
func (r *startupRun) client(ctx context.Context, addr string) []attempt {
	var out []attempt
	var firstOK time.Time
	for n := 0; n < 2000 && ctx.Err() == nil; n++ {
		time.Sleep(attemptEvery)
		if r.isPaused() {
			continue
		}
		if !firstOK.IsZero() && time.Since(firstOK) > time.Second {
			break
		}
		a := attempt{sent: time.Now()}
		dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		conn, err := r.c.Dial(dctx, "tcp", addr)
		cancel()
		a.done = time.Now()
		switch {
		case err == nil:
			a.accepted = true
			conn.Close()
			if firstOK.IsZero() {
				firstOK = a.done
			}
		case errors.Is(err, syscall.ECONNREFUSED):
			a.refused = true
		}
		out = append(out, a)
	}
	return out
}

func (r *startupRun) isPaused() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.paused
}

func (r *startupRun) setPaused(p bool) {
	r.mu.Lock()
	r.paused = p
	if p {
		r.pauseAt = time.Now()
	} else {
		r.resumeAt = time.Now()
	}
	r.mu.Unlock()
}

// pauseAroundReady pauses the clients 1.5 s after the health port first
// accepts (the readiness probe runs 3 s after the start at the earliest)
// and resumes them 200 ms after the API shows the pod Ready and the
// daemon's startup has its Ready mark.
func (r *startupRun) pauseAroundReady(ctx context.Context, t *testing.T) {
	t.Helper()
	health := cluster.PodAddr(&r.pod, healthPort)
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		conn, err := r.c.Dial(ctx, "tcp", health)
		if err != nil {
			return false, nil
		}
		conn.Close()
		return true, nil
	})
	if err != nil {
		t.Fatalf("health port of %s never opened: %v", r.pod.Name, err)
	}
	time.Sleep(1500 * time.Millisecond)
	r.setPaused(true)
	err = wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := r.c.Client.CoreV1().Pods(r.pod.Namespace).Get(ctx, r.pod.Name, metav1.GetOptions{})
		return err == nil && podIsReady(p) && !daemonReady(r.d, string(r.pod.UID)).IsZero(), nil
	})
	if err != nil {
		t.Fatalf("pod %s not Ready in the API and the daemon: %v", r.pod.Name, err)
	}
	time.Sleep(200 * time.Millisecond)
	r.setPaused(false)
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// daemonReady is the Ready mark of the daemon's startup of uid so far.
func daemonReady(d *nodeDaemon, uid string) time.Time {
	for _, s := range d.Startups() {
		if s.PodUID == uid {
			return s.Marks.Ready
		}
	}
	return time.Time{}
}

func (r *startupRun) check(t *testing.T, got correlate.Startup) {
	t.Helper()
	ready := got.Marks.Ready
	var before, after, total int
	var first *attempt
	for i := range r.attempts {
		for j := range r.attempts[i] {
			a := &r.attempts[i][j]
			total++
			if d := a.sent.Sub(ready); d > -boundaryMargin && d < boundaryMargin {
				t.Fatalf("an attempt sent %v from the daemon's Ready mark (paused %v to %v): the clients cannot tell its side",
					d, r.pauseAt.Sub(ready), r.resumeAt.Sub(ready))
			}
			switch {
			case a.refused && a.sent.Before(ready):
				before++
			case a.refused:
				after++
			case a.accepted && (first == nil || a.sent.Before(first.sent)):
				first = a
			}
		}
	}
	t.Logf("clients: %d attempts, refused %d before and %d after Ready (paused %v to %v around it); drainwatch %+v marks %+v listeners %+v diagnoses %+v",
		total, before, after, r.pauseAt.Sub(ready), r.resumeAt.Sub(ready), got.Counts, got.Marks, got.Listeners, got.Diagnoses)
	n := got.Counts
	if n.RefusedBeforeReady != before || n.RefusedAfterReady != after || before == 0 || after == 0 {
		t.Errorf("drainwatch refused before Ready %d, after %d; the clients %d and %d (want equal, and both seen)",
			n.RefusedBeforeReady, n.RefusedAfterReady, before, after)
	}
	if n.ResetAfterReady != 0 || n.ProbeRefused != 0 || got.Partial {
		t.Errorf("reset after Ready %d, probes refused %d, partial %v: want 0, 0 (the probe's port listened before its first run), complete",
			n.ResetAfterReady, n.ProbeRefused, got.PartialReasons)
	}
	r.checkFirstAccept(t, got, first)
	if len(got.Diagnoses) != 1 || got.Diagnoses[0].Code != correlate.DiagReadyBeforeListening {
		t.Errorf("diagnoses %+v, want %s", got.Diagnoses, correlate.DiagReadyBeforeListening)
	}
	if got.Workload.Kind != "Deployment" || got.Workload.Name != "web" || got.Workload.Revision != "1" {
		t.Errorf("workload %+v, want Deployment web revision 1", got.Workload)
	}
	if v := counterSum(r.d, "drainwatch_connections_refused_after_ready_total", r.pod.Namespace); v != float64(after) {
		t.Errorf("drainwatch_connections_refused_after_ready_total %v, want %d", v, after)
	}
	if v := counterSum(r.d, "drainwatch_connections_refused_before_ready_total", r.pod.Namespace); v != float64(before) {
		t.Errorf("drainwatch_connections_refused_before_ready_total %v, want %d", v, before)
	}
}

// checkFirstAccept: the daemon's first accept is the first accepted
// client's connection, between its send and its connect's return (the
// kernel's wall clock is converted from the monotonic one once: 5 ms of
// slack), and ready_to_first_accept is it minus Ready.
func (r *startupRun) checkFirstAccept(t *testing.T, got correlate.Startup, first *attempt) {
	t.Helper()
	fa := got.Marks.FirstAccept
	const slack = 5 * time.Millisecond
	if first == nil || fa.Before(first.sent.Add(-slack)) || fa.After(first.done.Add(slack)) {
		t.Errorf("first accept %v; the first accepted client sent at %v, connected at %v", fa, first.sentOrZero(), first.doneOrZero())
	}
	if got.ReadyToFirstAccept != fa.Sub(got.Marks.Ready) || got.ReadyToFirstAccept <= 0 {
		t.Errorf("ready_to_first_accept %v, want first accept − Ready = %v", got.ReadyToFirstAccept, fa.Sub(got.Marks.Ready))
	}
}

func (a *attempt) sentOrZero() time.Time {
	if a == nil {
		return time.Time{}
	}
	return a.sent
}

func (a *attempt) doneOrZero() time.Time {
	if a == nil {
		return time.Time{}
	}
	return a.done
}

// waitPodAddressed waits for the namespace's one pod to have an address.
func waitPodAddressed(ctx context.Context, t *testing.T, c *cluster.Cluster, ns string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(l.Items) != 1 || l.Items[0].Status.PodIP == "" {
			return false, nil
		}
		pod = l.Items[0]
		return true, nil
	})
	if err != nil {
		t.Fatalf("no pod with an address in %s: %v", ns, err)
	}
	return pod
}

// waitStartup waits for the daemon's complete startup of uid.
func waitStartup(ctx context.Context, t *testing.T, d *nodeDaemon, uid string) correlate.Startup {
	t.Helper()
	var got correlate.Startup
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		for _, s := range d.Startups() {
			if s.PodUID == uid && s.Complete {
				got = s
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no complete startup of %s on %s: %v", uid, d.node, err)
	}
	return got
}
