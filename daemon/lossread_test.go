package daemon

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/collector/kernel"
	"github.com/drainwatch/drainwatch/correlate"
)

// statsKernel is a kernel side whose counter reads the test scripts: the
// loss accounting calls nothing else (the embedded nil Kernel panics if it
// did).
type statsKernel struct {
	Kernel
	st  kernel.Stats
	err error
}

func (k *statsKernel) Stats() (kernel.Stats, error) { return k.st, k.err }

// read is one tick's read of the kernel's counters, ms after the stop
// signal: failing, or reporting lost events in all.
type read struct {
	ms   int
	fail bool
	lost uint64
}

// TestFailedLossReadMakesTerminationsPartial: a tick whose read of the
// kernel's loss counters fails opens a gap at the last read that succeeded,
// closed by the next that succeeds; the termination it overlaps is partial
// with loss_counters_unreadable, the others stay clean. The stop signal is
// at 0, the pod is deleted at −20 ms, the init exits at 2 s and the pod is
// gone at 2.1 s.
func TestFailedLossReadMakesTerminationsPartial(t *testing.T) {
	for _, tc := range []struct {
		name      string
		reads     []read
		partial   []string
		lostTotal int
	}{
		{"every read succeeds", []read{{ms: -60000}, {ms: 1000}, {ms: 3000}}, nil, 0},
		{"failed and readable again before the deletion", []read{{ms: -60000}, {ms: -50000, fail: true},
			{ms: -40000}, {ms: 1000}}, nil, 0},
		{"failed during the drain", []read{{ms: -60000}, {ms: 500}, {ms: 1000, fail: true}, {ms: 3000}},
			[]string{lossUnreadable}, 0},
		{"failed since before the deletion, never readable again", []read{{ms: -60000}, {ms: -30000, fail: true}},
			[]string{lossUnreadable}, 0},
		// The first failure is after the exit, yet the events lost since
		// the last good read (before the exit) are unknown.
		{"failed after the pod is gone", []read{{ms: -60000}, {ms: 1500}, {ms: 2500, fail: true}, {ms: 3000}},
			[]string{lossUnreadable}, 0},
		// What the failed reads missed is counted by the next good one,
		// over the span since the last good read.
		{"losses counted after the failures", []read{{ms: -60000}, {ms: 500}, {ms: 1000, fail: true},
			{ms: 3000, lost: 5}}, []string{lossUnreadable, "events_lost"}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, k := lossTestDaemon(t, nil)
			got := terminationWithReads(t, d, k, tc.reads)
			if !slices.Equal(got.PartialReasons, tc.partial) || got.Partial != (len(tc.partial) > 0) {
				t.Errorf("partial %v %v, want %v", got.Partial, got.PartialReasons, tc.partial)
			}
			if n := lostTotal(t, d); n != tc.lostTotal {
				t.Errorf("drainwatch_kernel_events_lost_total = %d, want %d", n, tc.lostTotal)
			}
		})
	}
}

// TestFailedBaselineRead: the start's read fails, with 100 losses of
// earlier runs pinned in the kernel. The first good read is the baseline
// (the 100 are not counted again), and the terminations overlapping the
// span before it are partial.
func TestFailedBaselineRead(t *testing.T) {
	for _, tc := range []struct {
		name      string
		firstGood int
		partial   []string
	}{
		{"readable before the deletion", -60000, nil},
		{"readable after the exit", 3000, []string{lossUnreadable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, k := lossTestDaemon(t, nil)
			started := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).Add(-65 * time.Second)
			d.cfg.Now = func() time.Time { return started }
			k.st.LostInKernel, k.err = 100, errors.New("reading the lost-events counter: bad file descriptor")
			d.baselineLost(Checkpoint{}, false)
			got := terminationWithReads(t, d, k, []read{{ms: tc.firstGood, lost: 100}, {ms: 4000, lost: 100}})
			if !slices.Equal(got.PartialReasons, tc.partial) {
				t.Errorf("partial %v, want %v", got.PartialReasons, tc.partial)
			}
			if n := lostTotal(t, d); n != 0 || d.counters.lostInKernel != 100 {
				t.Errorf("drainwatch_kernel_events_lost_total = %d, baseline %d; want 0 and 100", n, d.counters.lostInKernel)
			}
		})
	}
}

// TestRestoredLossGapEnds: a run that stopped while the reads failed
// (a crash: no final read) saves the open gap; the next run's first good
// read ends it, and its terminations are clean.
func TestRestoredLossGapEnds(t *testing.T) {
	d1, k1 := lossTestDaemon(t, nil)
	k1.err = errors.New("reading the lost-events counter: bad file descriptor")
	d1.accountLost(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC))
	state, err := d1.corr.Snapshot()
	must(t, err)
	d2, k2 := lossTestDaemon(t, nil)
	must(t, d2.corr.Restore(state))
	got := terminationWithReads(t, d2, k2, []read{{ms: -60000}, {ms: 3000}})
	if got.Partial {
		t.Errorf("partial %v after the gap's first good read, want clean", got.PartialReasons)
	}
}

// TestFailedLossReadsWarnRateLimited: reads failing at every tick (250 ms)
// for two minutes warn at the first and once a minute after, each with the
// failed reads since the last; the first good read says so once.
func TestFailedLossReadsWarnRateLimited(t *testing.T) {
	var buf bytes.Buffer
	d, k := lossTestDaemon(t, &buf)
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	d.counters.reads.last = t0
	k.err = errors.New("reading the lost-events counter: bad file descriptor")
	tick := 250 * time.Millisecond
	for i := 1; i <= 480; i++ { // t0+250ms .. t0+2min
		d.accountLost(t0.Add(time.Duration(i) * tick))
	}
	k.err = nil
	d.accountLost(t0.Add(481 * tick))
	d.accountLost(t0.Add(482 * tick))
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`{"level":"warn","error":"reading the lost-events counter: bad file descriptor","failed_reads":1,"since":"2026-12-01T12:00:00Z","message":"reading the kernel's loss counters failed: terminations from then until a read succeeds are partial (loss_counters_unreadable)"}`,
		`{"level":"warn","error":"reading the lost-events counter: bad file descriptor","failed_reads":240,"since":"2026-12-01T12:00:00Z","message":"reading the kernel's loss counters failed: terminations from then until a read succeeds are partial (loss_counters_unreadable)"}`,
		`{"level":"info","failed_reads":239,"since":"2026-12-01T12:00:00Z","message":"the kernel's loss counters are readable again"}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// lossTestDaemon is a daemon whose kernel side is a statsKernel, logging to
// log (nil: nowhere).
func lossTestDaemon(t *testing.T, log *bytes.Buffer) (*Daemon, *statsKernel) {
	t.Helper()
	logger := zerolog.Nop()
	if log != nil {
		logger = zerolog.New(log)
	}
	dir := t.TempDir()
	d, err := New(Config{NodeName: "node-1", StateDir: dir, CgroupRoot: dir, Log: logger})
	must(t, err)
	k := &statsKernel{}
	d.kernel = k
	return d, k
}

// terminationWithReads runs one pod's termination through the daemon's
// correlator, with the kernel counter reads at their times, and completes it.
func terminationWithReads(t *testing.T, d *Daemon, k *statsKernel, reads []read) correlate.Termination {
	t.Helper()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const uid, netns, grace = "uid-1", 4026532000, 30 * time.Second
	pod := collector.Pod{UID: uid, Namespace: "shop", Name: "web-1", Node: "node-1", GracePeriod: grace,
		Containers: []collector.Container{{Name: "app", ID: strings.Repeat("c", 64)}}, Ready: true}
	kernelEvent := func(typ collector.EventType, ms int) collector.Event {
		return collector.Event{Type: typ, Time: at(ms), NetnsIno: netns, PID: 7, TID: 7, TargetInit: true, Signal: 15}
	}
	steps := []struct {
		ms int
		do func()
	}{
		{-70000, func() { d.corr.Pod(collector.PodUpdate{Seen: at(-70000), Pod: pod}); d.corr.BindNetns(uid, netns) }},
		{-20, func() {
			p := pod
			p.DeletionTimestamp, p.DeletionGracePeriod, p.Ready = at(-20).Add(grace), grace, false
			d.corr.Pod(collector.PodUpdate{Seen: at(-20), Pod: p})
		}},
		{0, func() { d.corr.Kernel(kernelEvent(collector.EventSignal, 0)) }},
		{2000, func() { d.corr.Kernel(kernelEvent(collector.EventExit, 2000)) }},
		{2100, func() { d.corr.PodDeleted(collector.PodDeleted{Seen: at(2100), UID: uid}) }},
	}
	for _, r := range reads {
		steps = append(steps, struct {
			ms int
			do func()
		}{r.ms, func() {
			k.st.LostInKernel, k.err = r.lost, nil
			if r.fail {
				k.err = errors.New("reading the lost-events counter: bad file descriptor")
			}
			d.accountLost(at(r.ms))
		}})
	}
	slices.SortStableFunc(steps, func(a, b struct {
		ms int
		do func()
	}) int {
		return a.ms - b.ms
	})
	d.counters.reads.last = at(steps[0].ms)
	for _, s := range steps {
		s.do()
	}
	done := d.corr.Tick(at(2100).Add(time.Hour))
	if len(done) != 1 || done[0].PodUID != uid {
		t.Fatalf("completed %+v, want the termination of %s", done, uid)
	}
	return done[0]
}

// lostTotal is drainwatch_kernel_events_lost_total.
func lostTotal(t *testing.T, d *Daemon) int {
	t.Helper()
	mfs, err := d.metrics.Registry().Gather()
	must(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "drainwatch_kernel_events_lost_total" {
			return int(mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
	t.Fatal("no drainwatch_kernel_events_lost_total")
	return 0
}
