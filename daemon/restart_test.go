package daemon_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/daemon"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

// runningDaemon is a daemon run in-process until stop.
type runningDaemon struct {
	*daemon.Daemon
	stop func()
}

func startDaemon(t *testing.T, cfg daemon.Config) runningDaemon {
	t.Helper()
	d, err := daemon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon run: %v", err)
		}
	}
	t.Cleanup(stop)
	return runningDaemon{d, stop}
}

// waitTermination polls the daemon's API view until cond holds for uid.
func waitTermination(ctx context.Context, t *testing.T, d *daemon.Daemon, uid, what string, cond func(correlate.Termination) bool) correlate.Termination {
	t.Helper()
	var last correlate.Termination
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		var ok bool
		last, ok = d.Get(uid)
		return ok && cond(last), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last termination: %+v", what, err, last)
	}
	return last
}

// TestDaemonRestartMidTermination stops the daemon between the refusals of
// one termination and restarts it on the same state dir: the termination
// is completed once, with the refusals of both runs and none twice. When
// the kernel side survived the restart (pinned BPF objects) the record is
// exact; otherwise it is partial with daemon_down.
func TestDaemonRestartMidTermination(t *testing.T) {
	for _, tc := range []struct {
		name             string
		resumed, crashed bool
		lostWhileDown    uint64
	}{
		{"kernel_resumed", true, false, 0},
		{"kernel_restarted", false, false, 0},
		// A crash loses the events read after the last checkpoint, even
		// when the kernel side kept collecting.
		{"kernel_resumed_after_crash", true, true, 0},
		// The ring buffer overflowed while the daemon was down: the kernel
		// counted the losses, the termination is partial (events_lost).
		{"kernel_resumed_overflowed", true, false, 7},
	} {
		t.Run(tc.name, func(t *testing.T) { testRestart(t, restartCase{tc.resumed, tc.crashed, tc.lostWhileDown}) })
	}
}

type restartCase struct {
	resumed, crashed bool
	lostWhileDown    uint64
}

// simulateCrash rewrites the last checkpoint as a periodic one: what a
// daemon killed without its final checkpoint leaves.
func simulateCrash(t *testing.T, dir string) {
	t.Helper()
	s, err := daemon.OpenStore(dir)
	must(t, err)
	defer s.Close()
	cp, ok, err := s.LoadCheckpoint()
	must(t, err)
	if !ok || !cp.Clean {
		t.Fatalf("the orderly shutdown left no clean checkpoint (ok=%v)", ok)
	}
	cp.Clean = false
	must(t, s.SaveCheckpoint(cp, nil))
}

func testRestart(t *testing.T, tc restartCase) {
	resumed, crashed := tc.resumed, tc.crashed
	cp := cptest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := cp.Client
	ns := newNamespace(ctx, t, c, "restart")
	node := uniqueNode("restart")
	pod, err := c.CoreV1().Pods(ns).Create(ctx, barePod("web-1", node, map[string]string{"app": "web"}), metav1.CreateOptions{})
	must(t, err)
	uid, cid := string(pod.UID), strings.Repeat("cd", 32)
	fn := newFakeNode(t, uid, cid)
	podIP := netip.MustParseAddr("10.98.0.9")
	markRunning(pod, podIP.String(), "containerd://"+cid)
	_, err = c.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	must(t, err)

	kernel1 := newFakeKernel(false)
	rc := rest.CopyConfig(cp.RestConfig)
	cfg := daemon.Config{
		NodeName: node, Rest: rc, StateDir: t.TempDir(), CgroupRoot: fn.cgroupRoot, ProcRoot: fn.procRoot,
		Log: testLogger(t), OpenKernel: kernel1.open, TickEvery: 20 * time.Millisecond, CheckpointEvery: 50 * time.Millisecond,
		Correlate: correlate.Config{KernelTail: 300 * time.Millisecond},
	}
	d1 := startDaemon(t, cfg)
	must(t, wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		return kernel1.watching(fn.netns, fn.cgroupID), nil
	}))

	must(t, c.CoreV1().Pods(ns).Delete(ctx, "web-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}))
	waitTermination(ctx, t, d1.Daemon, uid, "deletion seen", func(t correlate.Termination) bool { return !t.Marks.DeletionSeen.IsZero() })
	kernel1.events <- stopSignal(fn, time.Now())
	var last time.Time
	for i := range 5 {
		last = time.Now()
		kernel1.events <- refused(fn, podIP, last, uint16(40000+i))
	}
	waitTermination(ctx, t, d1.Daemon, uid, "5 refusals", func(t correlate.Termination) bool { return t.Counts.RefusedAfterSigterm == 5 })
	d1.stop()
	if crashed {
		simulateCrash(t, cfg.StateDir)
	}

	kernel2 := newFakeKernel(resumed)
	kernel2.lostInKernel = tc.lostWhileDown
	cfg.OpenKernel = kernel2.open
	d2 := startDaemon(t, cfg)
	must(t, wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		return kernel2.watching(fn.netns, fn.cgroupID), nil
	}))
	// First in the resumed ring buffer: a refusal stamped just before the
	// last one counted (another CPU took its timestamp a little later than
	// its place in the ring). Resumed, it is new and counted; a fresh kernel
	// side cannot deliver it (the daemon drops it as a replay).
	kernel2.events <- refused(fn, podIP, last.Add(-time.Microsecond), 40999)
	for i := range 3 {
		kernel2.events <- refused(fn, podIP, time.Now(), uint16(41000+i))
	}
	kernel2.events <- initExit(fn, time.Now(), 143, 15)
	must(t, c.CoreV1().Pods(ns).Delete(ctx, "web-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	got := waitTermination(ctx, t, d2.Daemon, uid, "complete", func(t correlate.Termination) bool { return t.Complete })

	want := 8 // 5 before the restart, 3 after
	if resumed {
		want++ // and the one stamped before the watermark
	}
	if got.Counts.RefusedAfterSigterm != want || got.ExitCode != 143 {
		t.Errorf("refused_after_sigterm = %d, exit code %d; want %d and 143", got.Counts.RefusedAfterSigterm, got.ExitCode, want)
	}
	if partial := slices.Contains(got.PartialReasons, "daemon_down"); partial != (!resumed || crashed) {
		t.Errorf("resumed=%v crashed=%v: partial reasons %v", resumed, crashed, got.PartialReasons)
	}
	if lost := slices.Contains(got.PartialReasons, "events_lost"); lost != (tc.lostWhileDown > 0) {
		t.Errorf("%d events lost while down: partial reasons %v", tc.lostWhileDown, got.PartialReasons)
	}
	if resumed && !crashed && tc.lostWhileDown == 0 && got.Partial {
		t.Errorf("kernel resumed, yet the termination is partial: %v", got.PartialReasons)
	}
	if !kernel2.released(fn.netns, fn.cgroupID) {
		t.Errorf("scopes still watched after the termination completed")
	}
	if n := terminationsTotal(t, d2.Daemon); n != 1 {
		t.Errorf("drainwatch_terminations_total = %v, want 1", n)
	}
	series := rolloutSeries(t, d2.Daemon)
	d2.stop()

	// A third run replays the API (the pod is gone) and the stored record:
	// nothing is counted again.
	kernel3 := newFakeKernel(resumed)
	kernel3.lostInKernel = tc.lostWhileDown
	cfg.OpenKernel = kernel3.open
	d3 := startDaemon(t, cfg)
	again := waitTermination(ctx, t, d3.Daemon, uid, "stored termination", func(correlate.Termination) bool { return true })
	if again.Counts != got.Counts || !again.Complete {
		t.Errorf("after a second restart: %+v, want %+v", again.Counts, got.Counts)
	}
	if n := terminationsTotal(t, d3.Daemon); n != 1 {
		t.Errorf("after a second restart drainwatch_terminations_total = %v, want 1", n)
	}
	// The checkpoint saved every series: the third run exposes them as
	// the second left them.
	if got := rolloutSeries(t, d3.Daemon); got != series {
		t.Errorf("per-rollout series after a restart:\n%s\nbefore:\n%s", got, series)
	}
}

// rolloutSeries is the text exposition of the per-rollout series.
func rolloutSeries(t *testing.T, d *daemon.Daemon) string {
	t.Helper()
	b, err := testutil.GatherAndFormat(d.Metrics().Registry(), expfmt.TypeTextPlain,
		"drainwatch_terminations_total", "drainwatch_connections_refused_after_sigterm_total",
		"drainwatch_requests_killed_by_sigkill_total", "drainwatch_connections_accepted_after_endpoint_removal_total",
		"drainwatch_connections_reset_at_shutdown_total", "drainwatch_probe_connections_refused_total",
		"drainwatch_terminations_partial_total", "drainwatch_termination_phase_seconds", "drainwatch_routing_lag_seconds")
	must(t, err)
	return string(b)
}

// terminationsTotal sums drainwatch_terminations_total over its series.
func terminationsTotal(t *testing.T, d *daemon.Daemon) float64 {
	t.Helper()
	mfs, err := d.Metrics().Registry().Gather()
	must(t, err)
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "drainwatch_terminations_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}
