package e2e_test

import (
	"context"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/lab"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// backendPort is where the dwserver behind haproxy listens in the pod.
const backendPort = cluster.ServerPort + 1

// TestProductionMore runs production shapes on one node sharing cptest's
// control plane: haproxy's soft stop in front of a backend, a preStop that
// eats the whole grace period, and a drain that outlives it.
// (Go's net/http Shutdown with --drain-delay=0s and a slow request in flight
// is TestSeedsDirect/protocol-delay0.)
func TestProductionMore(t *testing.T) {
	c, ds := startCluster(t, "e2m-", 1)
	t.Run("haproxy-sigusr1", func(t *testing.T) { haproxySoftStop(t, c, ds) })
	t.Run("budget-too-small", func(t *testing.T) { budgetTooSmall(t, c, ds) })
	t.Run("grace-exceeded", func(t *testing.T) { graceExceeded(t, c, ds) })
}

// haproxySoftStop: Debian's haproxy (image STOPSIGNAL SIGUSR1: soft stop,
// listeners close at once, open connections finish) on ServerPort in front of
// a naive dwserver in the same pod. The seeds' client sends /work straight
// at the pod for a second after the deletion while the slow request, proxied
// to the backend's /slow, holds haproxy alive.
//
// The stop signal mark is the first outside signal to any container's init.
// The runtime stops containers in parallel, so haproxy's SIGUSR1 and the
// backend's SIGTERM come within microseconds of each other in either order:
// the mark would then name whichever the scheduler ran first. The backend
// has a preStop sleep of 1 s, as an application behind a proxy does, so its
// SIGTERM comes a second later: the stop signal is SIGUSR1 to haproxy, and
// the backend's later SIGTERM must not replace it.
func haproxySoftStop(t *testing.T, c *cluster.Cluster, ds []*nodeDaemon) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := unique("e2e-haproxy")
	argv, err := workload.HAProxy{Dir: t.TempDir(), Addr: ":" + strconv.Itoa(cluster.ServerPort),
		Backend: "127.0.0.1:" + strconv.Itoa(backendPort)}.Write()
	if err != nil {
		t.Fatal(err)
	}
	run := runSeeds(ctx, t, c, ds, ns, haproxyDeployment(ns, "web", argv[1:]))
	victim, res, got, want := run.victim, run.res, run.got, run.want
	probes := run.proberRefused(t, c)
	t.Logf("clients %s (work) %s (ready) slow %s; prober refused %d; drainwatch %+v stop %d to %q (API %d) %v partial %v",
		client.Summarize(res.Work), client.Summarize(res.Readiness), res.Slow.Outcome, probes,
		got.Counts, got.StopSignal, got.StopSignalTarget, got.StopSignalAPI, codes(got), got.PartialReasons)
	for _, term := range c.Terminations(victim.UID) {
		t.Logf("node agent: %s stop %v at %s, exit %d at %s", term.Container, term.StopSignal,
			term.StopSignalAt.Format(time.StampMicro), term.ExitCode, term.ExitAt.Format(time.StampMicro))
	}
	if got.StopSignal != uint32(syscall.SIGUSR1) || got.StopSignalTarget != "haproxy" || got.StopSignalAPI != uint32(syscall.SIGUSR1) {
		t.Errorf("stop signal %d to %q (API %d), want SIGUSR1 to haproxy, SIGUSR1 in the API", got.StopSignal, got.StopSignalTarget, got.StopSignalAPI)
	}
	assertSeedsRefusals(t, got, res, want, probes)
	if res.Slow.Outcome != client.OK || got.Counts.RequestsKilledBySigkill != 0 || got.Partial {
		t.Errorf("slow %s, killed %d, partial %v: want the soft stop to finish the proxied request, complete view",
			res.Slow.Outcome, got.Counts.RequestsKilledBySigkill, got.PartialReasons)
	}
	if !slices.Contains(codes(got), correlate.DiagListenerClosedEarly) {
		t.Errorf("diagnoses %v, want %s", codes(got), correlate.DiagListenerClosedEarly)
	}
	// haproxy, still alive, resets its own pooled connection to the
	// backend over the pod's loopback after the last listener closed: no
	// client sees it, and drainwatch keeps loopback out of the resets.
	cut := cutTo(run.addr, res.Work, res.Readiness, []client.Request{res.Slow})
	t.Logf("connections_reset_at_shutdown %d, clients cut %d; listener_closed (last listener) %s after the stop signal",
		got.Counts.ConnectionsResetAtShutdown, cut, got.Marks.ListenerClosed.Sub(got.Marks.StopSignal))
	if got.Counts.ConnectionsResetAtShutdown != cut {
		t.Errorf("connections_reset_at_shutdown %d, clients saw %d reset or empty replies", got.Counts.ConnectionsResetAtShutdown, cut)
	}
}

// haproxyDeployment: container "haproxy" (image "haproxy", args) on "http"
// with a readiness probe on /work (answered by haproxy), and container
// "backend", a naive dwserver on backendPort with its own readiness probe
// and a preStop sleep of 1 s.
func haproxyDeployment(ns, name string, args []string) *appsv1.Deployment {
	dep := cluster.ServerDeployment(ns, name, workload.ModeNaive, 1, "--port="+strconv.Itoa(backendPort))
	spec := &dep.Spec.Template.Spec
	backend := spec.Containers[0]
	backend.Name = "backend"
	backend.Ports = []corev1.ContainerPort{{Name: "backend", ContainerPort: backendPort}}
	backend.ReadinessProbe.HTTPGet.Port = intstr.FromString("backend")
	backend.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 1}}}
	proxy := corev1.Container{Name: "haproxy", Image: "haproxy", Args: args,
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: cluster.ServerPort}},
		ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/work", Port: intstr.FromString("http")}}}}
	spec.Containers = []corev1.Container{proxy, backend}
	dep.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: name}
	return dep
}

// budgetTooSmall: grace 3 s and a preStop sleep of 3 s: the kubelet leaves
// the 2 s floor for the stop, the protocol server drains 1 s, closes its
// listener, finishes the slow request (4.5 s from just before the deletion)
// and exits before SIGKILL. preStop 3 s + drain 1.5 s + margin 1 s do not
// fit in 3 s. The client sends /work for 5 s after the deletion, so it meets
// the closed listener while the slow request holds the server alive (once
// the server exits, the pod's network is torn down and later requests time
// out instead of being refused).
func budgetTooSmall(t *testing.T, c *cluster.Cluster, ds []*nodeDaemon) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := unique("e2e-budget")
	dep := cluster.ServerDeployment(ns, "web", workload.ModeProtocol, 1, "--drain-delay=1s")
	dep.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](3)
	dep.Spec.Template.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 3}}}
	pods := deploy(ctx, t, c, ns, dep)
	waitWatching(ctx, t, ds, pods)
	victim := &pods[0]
	addr := cluster.PodAddr(victim, cluster.ServerPort)
	seeds := client.Seeds{Dial: c.Dial, Target: addr, Pod: addr, Window: 5 * time.Second, SlowMs: 4500,
		Stop: func(ctx context.Context) error { return c.DeletePod(ctx, ns, victim.Name) }}
	res, err := seeds.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := waitComplete(ctx, t, daemonOf(t, ds, victim), string(victim.UID))
	want := lab.RefusedTo(addr, res.Work, res.Readiness, []client.Request{res.Slow})
	probes, err := c.ProbeRefusals(victim, res.StopAt)
	if err != nil {
		t.Fatal(err)
	}
	term, err := c.WaitTerminated(ctx, victim.UID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("clients %s (work) %s (ready) slow %s; prober refused %d; node agent preStop %ds stop timeout %ds sigkill %v exit %d; drainwatch %+v grace %v %v partial %v",
		client.Summarize(res.Work), client.Summarize(res.Readiness), res.Slow.Outcome, probes, term.PreStopElapsed,
		term.StopTimeout, !term.SIGKILLAt.IsZero(), term.ExitCode, got.Counts, got.GracePeriod, codes(got), got.PartialReasons)
	for _, d := range got.Diagnoses {
		t.Logf("%s: %s", d.Code, d.Message)
	}
	if term.StopTimeout != 2 || !term.SIGKILLAt.IsZero() || term.ExitCode != 0 {
		t.Errorf("node agent: stop timeout %ds, SIGKILL %v, exit %d: want the 2 s floor, a clean exit in it",
			term.StopTimeout, term.SIGKILLAt, term.ExitCode)
	}
	assertSeedsRefusals(t, got, res, want, probes)
	if res.Slow.Outcome != client.OK || got.Counts.RequestsKilledBySigkill != 0 || got.Partial {
		t.Errorf("slow %s, killed %d, partial %v: want no kill, complete view", res.Slow.Outcome,
			got.Counts.RequestsKilledBySigkill, got.PartialReasons)
	}
	// No SIGKILL: every request cut (reset or empty reply) was cut by the
	// shutdown, a connection queued when the listener closed.
	if cut := cutTo(addr, res.Work, res.Readiness); got.Counts.ConnectionsResetAtShutdown != cut {
		t.Errorf("connections_reset_at_shutdown %d, clients saw %d reset or empty replies", got.Counts.ConnectionsResetAtShutdown, cut)
	}
	for _, code := range []string{correlate.DiagBudgetTooSmall, correlate.DiagListenerClosedEarly} {
		if !slices.Contains(codes(got), code) {
			t.Errorf("diagnoses %v, want %s", codes(got), code)
		}
	}
	for _, code := range []string{correlate.DiagGraceExceeded, correlate.DiagRequestsKilled, correlate.DiagStopSignalIgnored} {
		if slices.Contains(codes(got), code) {
			t.Errorf("diagnoses %v: %s without a SIGKILL", codes(got), code)
		}
	}
}

// graceExceeded: a protocol server with --drain-delay=0s handles SIGTERM
// (its listener closes at once, Shutdown waits for what is in flight) but
// three /slow requests of 20 s outlive the grace of 3 s: SIGKILL cuts them.
// The server reacted, so this is grace_period_exceeded and requests_killed,
// not stop_signal_ignored.
func graceExceeded(t *testing.T, c *cluster.Cluster, ds []*nodeDaemon) {
	const inflight = 3
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := unique("e2e-grace")
	dep := cluster.ServerDeployment(ns, "web", workload.ModeProtocol, 1, "--drain-delay=0s")
	dep.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](3)
	pods := deploy(ctx, t, c, ns, dep)
	waitWatching(ctx, t, ds, pods)
	victim := &pods[0]
	addr := cluster.PodAddr(victim, cluster.ServerPort)
	slow, waitSlow := startSlow(ctx, c, addr, inflight)
	stopAt := time.Now()
	if err := c.DeletePod(ctx, ns, victim.Name); err != nil {
		t.Fatal(err)
	}
	waitSlow()
	got := waitComplete(ctx, t, daemonOf(t, ds, victim), string(victim.UID))
	term, err := c.WaitTerminated(ctx, victim.UID)
	if err != nil {
		t.Fatal(err)
	}
	killed := lab.KilledBy(addr, lab.Death{SIGKILL: term.SIGKILLAt, Exit: term.ExitAt}, slow)
	probes, err := c.ProbeRefusals(victim, stopAt)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("clients %s; killed by SIGKILL %d; prober refused %d; node agent exit %d; drainwatch %+v exit %d %v partial %v",
		client.Summarize(slow), killed, probes, term.ExitCode, got.Counts, got.ExitCode, codes(got), got.PartialReasons)
	for _, d := range got.Diagnoses {
		t.Logf("%s: %s", d.Code, d.Message)
	}
	if got.Counts.RequestsKilledBySigkill != killed || killed != inflight || got.ExitCode != 137 {
		t.Errorf("requests_killed_by_sigkill %d, clients killed %d, exit %d: want %d, %d, 137",
			got.Counts.RequestsKilledBySigkill, killed, got.ExitCode, inflight, inflight)
	}
	if cut := cutTo(addr, slow) - killed; got.Counts.ConnectionsResetAtShutdown != cut {
		t.Errorf("connections_reset_at_shutdown %d, clients saw %d cut before the SIGKILL", got.Counts.ConnectionsResetAtShutdown, cut)
	}
	if got.Counts.ProbeRefused != probes || got.Counts.RefusedAfterSigterm != 0 || got.Counts.RefusedBeforeSigterm != 0 {
		t.Errorf("probe_refused %d (prober %d), refused after/before %d/%d: want the prober's, and no client refusal",
			got.Counts.ProbeRefused, probes, got.Counts.RefusedAfterSigterm, got.Counts.RefusedBeforeSigterm)
	}
	for _, code := range []string{correlate.DiagGraceExceeded, correlate.DiagRequestsKilled} {
		if !slices.Contains(codes(got), code) {
			t.Errorf("diagnoses %v, want %s", codes(got), code)
		}
	}
	if slices.Contains(codes(got), correlate.DiagStopSignalIgnored) || got.Partial {
		t.Errorf("diagnoses %v partial %v: the server closed its listener at SIGTERM, complete view expected",
			codes(got), got.PartialReasons)
	}
}

// cutTo counts the requests to target that ended with a reset or an empty
// reply (EOF).
func cutTo(target string, reqs ...[]client.Request) int {
	n := 0
	for _, rs := range reqs {
		for _, r := range rs {
			if r.Target == target && (r.Outcome == client.Reset || r.Outcome == client.EOF) {
				n++
			}
		}
	}
	return n
}
