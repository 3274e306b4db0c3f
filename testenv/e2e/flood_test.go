package e2e_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
	"github.com/drainwatch/drainwatch/testenv/lab"
	"github.com/drainwatch/drainwatch/testenv/node"
	"github.com/drainwatch/drainwatch/testenv/privileged"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// The flood: floodWorkers threads in the fabric connect to the flood pod
// as fast as they can, every floodOpenEvery-th attempt to its open port
// (an accept, a tracked connection torn down at once), the others to a
// closed one (a refusal: one ring-buffer record each, the pod being
// watched), until floodCount attempts or floodFor. sleepers idle pods fill
// the node to the kubelet's default maximum of 110 with the flood pod and
// the victim.
const (
	sleepers       = 108
	floodWorkers   = 4
	floodCount     = 400_000
	floodFor       = 20 * time.Second
	floodOpenEvery = 8
	floodClosed    = 9 // nothing listens there
	victimLoad     = 5 * time.Millisecond
)

// TestFloodLeavesNeighboursExact runs the real `drainwatch run` (pinned,
// as in production) for a node with 110 pods. One pod is flooded with
// connection attempts from the fabric while another, a naive server under
// its own ground-truth client, is deleted. Whatever the flood does to the
// ring buffer, nothing is lost silently:
//   - every refusal the kernel made in the watched pods (the flooded pod's
//     RSTs, from its network namespace's Tcp OutRsts; the victim's client's
//     and the kubelet prober's at the victim, as they saw them) is a
//     delivered refused event, a refused record the kernel counted as lost
//     (the lost counter's slot for refusals), or a record the correlator's
//     queue dropped: delivered + lost refusals = made when the queue
//     dropped nothing, and made <= that + the queue's drops otherwise,
//     where made is exact unless the flooder retransmitted a SYN: a RST
//     lost on the way back makes one refusal more than the client saw (see
//     checkFloodRsts);
//   - the victim's termination is exact (refused and probe_refused equal
//     the client's and the prober's) unless events were lost, and then it
//     is partial with events_lost (and, if its stop signal's or exit's
//     event was among them, stop_signal_not_seen or exit_not_seen) and
//     short by at most the refusals lost (in the kernel, and any record
//     dropped at the queue);
//   - the connection map never overflowed: at most floodWorkers flood
//     connections and the victim's few are open at once, far below its
//     65,536 entries, so drainwatch_kernel_connections_untracked_total
//     stays 0.
//
// The daemon's CPU time and RSS over the flood are logged, not asserted.
func TestFloodLeavesNeighboursExact(t *testing.T) {
	if testing.Short() {
		t.Skip("110 pods take minutes to start")
	}
	privileged.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c, d, pinDir := startFloodNode(ctx, t)
	flooded, victim := floodPods(ctx, t, c)
	waitScopesWatched(ctx, t, c, pinDir, flooded, victim)
	floodNetns := podNetns(t, c, flooded)
	before, kernelBefore, rsts := readFloodMetrics(ctx, t, d.URL), pinnedLost(t, pinDir), outRsts(t, floodNetns)
	fr, term, reqs := floodWhileTerminating(ctx, t, c, d, flooded, victim)
	floodRsts := outRsts(t, floodNetns) - rsts
	got := waitCompleteAPI(ctx, t, d, victim)
	probes, err := c.ProbeRefusals(victim, term.Killing)
	must(t, err)
	want := lab.RefusedTo(cluster.PodAddr(victim, cluster.ServerPort), reqs)
	// The flooded pod refused what its flooder saw, and once more for a
	// RST lost on the way back (see checkFloodRsts).
	made := refusalsMade{lo: fr.refused + want + probes, hi: min(floodRsts, fr.refused+fr.retransmitted) + want + probes}
	checkFloodRsts(t, fr, floodRsts)
	after := waitFloodAccounted(ctx, t, d.URL, before, made.lo)
	lost := after.lost - before.lost
	k := pinnedLost(t, pinDir).minus(kernelBefore)
	if float64(k.all) > lost {
		t.Errorf("the kernel failed %d ring-buffer reserves, drainwatch_kernel_events_lost_total rose by %v", k.all, lost)
	}
	queue := lost - float64(k.all)
	t.Logf("lost in the kernel (ring buffer full) %d, %d of them refusals; at the correlator's queue %v", k.all, k.refused, queue)
	checkEventsAccounted(t, after.refused-before.refused, float64(k.refused), queue, made)
	// A refusal of the victim's can be among the kernel's lost refusals or
	// the queue's drops (of any type: that counter has none).
	checkVictim(t, got, want, probes, lost, float64(k.refused)+queue)
	if n := after.untracked - before.untracked; n != 0 {
		t.Errorf("drainwatch_kernel_connections_untracked_total rose by %v: the connection map overflowed with at most %d flood connections open", n, floodWorkers)
	}
	logMaps(t, pinDir)
}

// floodWhileTerminating floods the flooded pod while the victim, under its
// client's load, is deleted; it returns the flood's outcome, the node
// agent's record of the victim's termination and the client's requests,
// and logs the daemon's CPU time and RSS over the flood.
func floodWhileTerminating(ctx context.Context, t *testing.T, c *cluster.Cluster, d *lab.Daemon, flooded, victim *corev1.Pod) (floodResult, node.Termination, []client.Request) {
	t.Helper()
	cpu0, start := procCPU(t, d.PID()), time.Now()
	load := client.Load{Dial: c.Dial, Target: cluster.PodAddr(victim, cluster.ServerPort), Path: "/work", Interval: victimLoad,
		Count: int(floodFor / victimLoad), Duration: floodFor}
	loadDone := make(chan []client.Request, 1)
	go func() { reqs, _ := load.Run(ctx); loadDone <- reqs }()
	floodDone := make(chan floodResult, 1)
	go func() { floodDone <- flood(t, c, flooded.Status.PodIP) }()
	time.Sleep(3 * time.Second) // the flood is at full speed
	must(t, c.DeletePod(ctx, victim.Namespace, victim.Name))
	term, err := c.WaitTerminated(ctx, victim.UID)
	must(t, err)
	rss := procStatus(t, d.PID())
	fr := <-floodDone
	cpu, took := procCPU(t, d.PID())-cpu0, time.Since(start)
	reqs := <-loadDone
	if term.ExitAt.After(fr.end) {
		t.Fatalf("the victim exited at %v, after the flood ended at %v: the flood did not overlap its termination", term.ExitAt, fr.end)
	}
	t.Logf("flood: %d attempts in %v from %d threads (%d refused, %d accepted, %d other: %v); victim's client %s",
		fr.attempts(), fr.end.Sub(fr.start).Round(time.Millisecond), floodWorkers, fr.refused, fr.accepted, fr.other, fr.errs, client.Summarize(reqs))
	t.Logf("daemon during the flood: CPU %v in %v (%.0f%% of one core), VmRSS %d MiB, VmHWM %d MiB",
		cpu, took.Round(time.Millisecond), 100*cpu.Seconds()/took.Seconds(), rss["VmRSS:"]>>10, rss["VmHWM:"]>>10)
	return fr, term, reqs
}

// startFloodNode starts one node and the real daemon, pinned under the
// default pin path (its maps are read from there).
func startFloodNode(ctx context.Context, t *testing.T) (*cluster.Cluster, *lab.Daemon, string) {
	t.Helper()
	warn := zerolog.New(zerolog.NewConsoleWriter(func(w *zerolog.ConsoleWriter) { w.Out = os.Stderr })).Level(zerolog.WarnLevel)
	c := cluster.StartT(t, cluster.Options{Nodes: 1, NodePrefix: unique("e2f") + "-", ControlPlane: cptest.Get(t), Log: warn, Dir: t.TempDir()})
	bin, err := lab.BuildDrainwatch(ctx, t.TempDir())
	must(t, err)
	root, err := node.Cgroup2Mount()
	must(t, err)
	d, err := lab.StartDaemon(ctx, lab.DaemonSpec{Bin: bin, Node: c.NodeNames[0], Kubeconfig: c.Kubeconfig, CgroupRoot: root, Dir: t.TempDir()})
	must(t, err)
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c, d, pinDirOf(c.NodeNames[0])
}

// floodPods starts the sleepers, the flood pod and the victim (a naive
// server each, with a readiness probe) and returns the last two.
func floodPods(ctx context.Context, t *testing.T, c *cluster.Cluster) (flooded, victim *corev1.Pod) {
	t.Helper()
	ns := unique("e2e-flood")
	idle := cluster.ServerDeployment(ns, "sleepers", workload.ModeNaive, sleepers)
	ctr := &idle.Spec.Template.Spec.Containers[0]
	ctr.Image, ctr.Args, ctr.ReadinessProbe = "local:/bin/sleep", []string{"infinity"}, nil
	must(t, c.Apply(ctx, cluster.Namespace(ns), idle,
		cluster.ServerDeployment(ns, "flooded", workload.ModeNaive, 1), cluster.ServerDeployment(ns, "victim", workload.ModeNaive, 1)))
	start := time.Now()
	var pods []*corev1.Pod
	for _, name := range []string{"sleepers", "flooded", "victim"} {
		_, err := c.WaitRolledOut(ctx, ns, name)
		must(t, err)
		ready, err := c.ReadyPods(ctx, ns, "app="+name)
		must(t, err)
		pods = append(pods, &ready[0])
	}
	t.Logf("%d pods running after %v", sleepers+2, time.Since(start).Round(time.Second))
	return pods[1], pods[2]
}

// floodResult is what the flooder's connect calls returned.
type floodResult struct {
	refused, accepted, other int
	// retransmitted counts the SYNs the flooder sent again before it was
	// refused (TCP_INFO): each is one more refusal when the RST before it
	// was lost, none when the SYN itself was.
	retransmitted int
	errs          map[string]int // the other outcomes, by error
	start, end    time.Time
}

func (r floodResult) attempts() int { return r.refused + r.accepted + r.other }

// flood runs floodWorkers flooders in the fabric until floodCount
// attempts in all or floodFor, and adds up their outcomes.
func flood(t *testing.T, c *cluster.Cluster, podIP string) floodResult {
	ip := netip.MustParseAddr(podIP).As4()
	res := floodResult{errs: map[string]int{}, start: time.Now()}
	deadline := res.start.Add(floodFor)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range floodWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine floodResult
			mine.errs = map[string]int{}
			err := c.Fabric.Do(func() error { return floodFrom(ip, floodCount/floodWorkers, deadline, &mine) })
			mu.Lock()
			defer mu.Unlock()
			res.refused, res.accepted, res.other = res.refused+mine.refused, res.accepted+mine.accepted, res.other+mine.other
			res.retransmitted += mine.retransmitted
			for e, n := range mine.errs {
				res.errs[e] += n
			}
			if err != nil {
				t.Errorf("flooder: %v", err)
			}
		}()
	}
	wg.Wait()
	res.end = time.Now()
	return res
}

// floodFrom connects with blocking system calls on this (locked, fabric)
// thread: a socket, a connect, a close per attempt.
func floodFrom(ip [4]byte, count int, deadline time.Time, r *floodResult) error {
	for i := 0; i < count && time.Now().Before(deadline); i++ {
		port := floodClosed
		if i%floodOpenEvery == 0 {
			port = cluster.ServerPort
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		err = unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: ip})
		var info *unix.TCPInfo
		if errors.Is(err, unix.ECONNREFUSED) {
			info, _ = unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		}
		unix.Close(fd)
		switch {
		case err == nil:
			r.accepted++
		case errors.Is(err, unix.ECONNREFUSED):
			r.refused++
			if info != nil {
				r.retransmitted += int(info.Total_retrans)
			}
		default:
			r.other++
			r.errs[err.Error()]++
		}
	}
	return nil
}

// refusalsMade is what the kernel refused in the watched pods: lo what
// the clients saw, hi with the flooder's retransmitted SYNs.
type refusalsMade struct{ lo, hi int }

// checkFloodRsts: the flooded pod's kernel sent a RST for every refusal
// its flooder saw, and one more for each RST lost on the way back (a full
// backlog on this 2-core node: the flooder retransmits the SYN 1 s later
// and is refused again, seen once in ~140,000), which shows as a
// retransmission in the flooder's TCP_INFO (as does a SYN lost on the way
// in, which makes no second RST). So flooder-seen <= refused <= flooder-
// seen + retransmitted, and <= the pod's Tcp OutRsts, which holds its other
// RSTs too (48 for 16,100 flood connections to the open port in one run).
// correlate counts such a retransmission once in a termination
// (synMemory); the kernel-event counter compared here counts RSTs.
func checkFloodRsts(t *testing.T, fr floodResult, rsts int) {
	t.Helper()
	t.Logf("the flooded pod's kernel sent %d RSTs; its flooder saw %d refusals after %d retransmitted SYNs", rsts, fr.refused, fr.retransmitted)
	if rsts < fr.refused {
		t.Errorf("the flooded pod sent %d RSTs (Tcp OutRsts), fewer than the %d refusals its flooder saw", rsts, fr.refused)
	}
}

// checkEventsAccounted: every refusal made is a refused record the daemon
// received (drainwatch_kernel_events_total{type="refused"}), one the kernel
// counted as lost (the pinned counter's refused slot), or one of the
// records of any type the correlator's queue dropped (that counter has no
// type): exactly when the queue dropped nothing.
func checkEventsAccounted(t *testing.T, delivered, lostRefused, queue float64, made refusalsMade) {
	t.Helper()
	t.Logf("refusals made in the watched pods %d to %d; refused records delivered %v, lost in the kernel %v; records dropped at the queue %v",
		made.lo, made.hi, delivered, lostRefused, queue)
	if n := delivered + lostRefused; n > float64(made.hi) || n+queue < float64(made.lo) {
		t.Errorf("%v refused records delivered + %v lost in the kernel (+ %v of any type dropped at the queue), want the %d to %d refusals made",
			delivered, lostRefused, queue, made.lo, made.hi)
	}
}

// checkVictim: exact, or partial with events_lost and short by at most
// the loss.
func checkVictim(t *testing.T, got exporter.TerminationView, want, probes int, lost, lostRefusals float64) {
	t.Helper()
	n := got.Counts.RefusedAfterSigterm + got.Counts.RefusedBeforeSigterm
	t.Logf("victim %s: client refused %d, prober refused %d; drainwatch refused %d, probe_refused %d, partial %v %v",
		got.Pod, want, probes, n, got.Counts.ProbeRefused, got.Partial, got.PartialReasons)
	switch {
	case !got.Partial && (n != want || got.Counts.ProbeRefused != probes):
		t.Errorf("victim exact: refused %d probe_refused %d, want %d and %d", n, got.Counts.ProbeRefused, want, probes)
	case got.Partial && (lost == 0 || !lossReasons(got.PartialReasons)):
		t.Errorf("victim partial %v with %v events lost: want exact, or partial with events_lost (and what a lost event hides) only when events were lost", got.PartialReasons, lost)
	case got.Partial && (n > want || float64(want+probes-n-got.Counts.ProbeRefused) > lostRefusals):
		t.Errorf("victim partial: counted %d+%d of %d+%d, more than made or short by more than the %v refusals that can have been lost", n, got.Counts.ProbeRefused, want, probes, lostRefusals)
	}
}

// lossReasons: events_lost, and otherwise only the marks a lost event
// can hide (its stop signal or its exit was in the ring when it was full).
func lossReasons(reasons []string) bool {
	for _, r := range reasons {
		if r != "exit_not_seen" && r != "stop_signal_not_seen" && r != "events_lost" {
			return false
		}
	}
	return slices.Contains(reasons, "events_lost")
}

// waitCompleteAPI waits until the daemon's API reports p's termination
// complete.
func waitCompleteAPI(ctx context.Context, t *testing.T, d *lab.Daemon, p *corev1.Pod) exporter.TerminationView {
	t.Helper()
	var got exporter.TerminationView
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		vs, _ := exporter.QueryDaemons(ctx, []exporter.Daemon{d.API()}, exporter.Filter{Namespace: p.Namespace, Pod: p.Name})
		for _, v := range vs {
			if v.PodUID == string(p.UID) {
				got = v
			}
		}
		return got.Complete, nil
	})
	if err != nil {
		t.Fatalf("termination of %s not complete: %v (last %+v)", p.Name, err, got)
	}
	return got
}
