package correlate

import (
	"maps"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// A pod IP reused by a new pod: pod A (no netns binding, so attribution
// falls back to its IP) terminates; pod B is seen with the same IP at +1 s.
// Refusals addressed to the IP go to the pod that held it at their time,
// and a refusal in B's network namespace goes to B even before B's IP was
// seen.
func TestIPReusedByNewPod(t *testing.T) {
	grace := 30 * time.Second
	evs := []any{
		collector.PodUpdate{Seen: ms(-60000), Pod: podOf(podA, ipA, grace, false)},
		bind{podA, 0, cgA},
		collector.PodUpdate{Seen: ms(-59999), Pod: podOf(podA, ipA, grace, true)},
		openListener(0, ms(-59000)),
		deleting(podA, ipA, grace, ms(-20), ms(-10)),
		signal(cgA, initPID, 15, true, "server", ms(0)),
		closeListener(0, ms(5)),
		refusals(0, ipA, 5, 100, 100),
		exited(cgA, initPID, 0, 0, true, ms(600)),
		gone(podA, ms(700)),
		collector.PodUpdate{Seen: ms(1000), Pod: podOf(podB, ipA, grace, false)},
		bind{podB, netB, cgB},
		refusals(0, ipA, 3, 800, 50),    // A held the IP then
		refusals(netB, ipA, 2, 950, 10), // B's namespace
		refusals(0, ipA, 4, 1100, 10),   // B holds the IP
	}
	c := New(Config{})
	a := finish(t, c, evs, ms(5700))
	if a.PodUID != podA || a.Counts.RefusedAfterSigterm != 8 {
		t.Fatalf("%s refused after SIGTERM = %d, want pod A with 8", a.PodUID, a.Counts.RefusedAfterSigterm)
	}
	// The pod's name alone (Events name their involvedObject with it).
	if want := "web-" + podA; a.Pod != want || a.Workload.Namespace != "shop" {
		t.Errorf("pod %q in %q, want %q in shop", a.Pod, a.Workload.Namespace, want)
	}
	if _, ok := c.Get(podB); ok {
		t.Errorf("pod B, not terminating, has a termination")
	}
	// After A is complete the address is B's alone.
	feed(c, refusals(0, ipA, 1, 5800, 1))
	if u := c.Unattributed(); len(u) != 0 {
		t.Errorf("unattributed = %v, want none", u)
	}
}

func TestUnattributedCountedByType(t *testing.T) {
	c := New(Config{})
	feed(c, []any{
		born(podA, ipA, netA, cgA, 30*time.Second, ms(0)),
		sock(collector.EventRefused, 99, netip.MustParseAddr("10.9.9.9"), 0, ms(1)),
		sock(collector.EventRefused, 98, netip.MustParseAddr("10.9.9.9"), 0, ms(2)),
		sock(collector.EventAccept, 99, netip.MustParseAddr("10.9.9.9"), 5, ms(3)),
		signal(12345, 77, 15, true, "other", ms(4)),
		sock(collector.EventRefused, netA, ipA, 0, ms(5)), // attributed to A, not terminating
	})
	want := map[collector.EventType]uint64{collector.EventRefused: 2, collector.EventAccept: 1, collector.EventSignal: 1}
	if got := c.Unattributed(); !maps.Equal(got, want) {
		t.Errorf("unattributed = %v, want %v", got, want)
	}
}

// After a force delete (pod gone at once, grace 0 from the API's view but
// the kubelet's 2 s floor), the exit has not been seen: the termination
// stays open until grace + floor + KernelTail, and the SIGKILL tail counts.
func TestSigkillTailAfterForceDelete(t *testing.T) {
	grace := 5 * time.Second
	evs := []any{
		born(podA, ipA, netA, cgA, grace, ms(-60000)),
		openListener(netA, ms(-59000)),
		accept(netA, 31, ms(-100)),
		deleting(podA, ipA, grace, ms(-20), ms(-10)),
		gone(podA, ms(-5)),
		signal(cgA, initPID, 15, true, "sh", ms(0)),
	}
	c := New(Config{})
	feed(c, evs)
	// deletion_seen −10 ms + grace 5 s + floor 2 s + tail 5 s.
	deadline := ms(11990)
	if done := c.Tick(ms(6000)); len(done) != 0 {
		t.Fatalf("completed before the SIGKILL tail: %+v", done[0])
	}
	got := finish(t, c, []any{
		signal(cgA, initPID, 9, true, "sh", ms(5000)),
		inflight(netA, initPID, 31, collector.CauseSigkill, ms(5001)),
		exited(cgA, initPID, 137, 9, true, ms(5002)),
	}, deadline)
	if got.Counts.RequestsKilledBySigkill != 1 || got.ExitCode != 137 || got.Partial {
		t.Errorf("killed %d exit %d partial %v %v, want 1 137 complete", got.Counts.RequestsKilledBySigkill, got.ExitCode, got.Partial, got.PartialReasons)
	}
}

// A stop signal with no deletion is a container's termination (a liveness
// kill): it ends when the container runs again under a new id, completes
// on its own, and does not leak into the pod's later termination.
func TestContainerRestartIsItsOwnTermination(t *testing.T) {
	grace := 30 * time.Second
	c := New(Config{})
	feed(c, []any{
		born(podA, ipA, netA, cgA, grace, ms(-60000)),
		signal(cgA, initPID, 15, true, "server", ms(0)),
		exited(cgA, initPID, 143, 15, true, ms(100)),
	})
	if done := c.Tick(ms(5001)); len(done) != 0 {
		t.Fatalf("a restart completed before its container ran again")
	}
	restart := finish(t, c, []any{running(podA, ipA, grace, "d", ms(300))}, ms(300).Add(DefaultConfig().KernelTail))
	if !restart.Marks.StopSignal.Equal(ms(0)) || restart.ExitCode != 143 || restart.Cause != CauseContainerRestart || restart.Partial {
		t.Errorf("restart: stop signal %v exit %d cause %q partial %v, want 0s 143 container_restart complete",
			restart.Marks.StopSignal.Sub(t0), restart.ExitCode, restart.Cause, restart.PartialReasons)
	}
	if _, ok := c.Get(podA); ok {
		t.Fatalf("a completed restart left a termination")
	}
	got := finish(t, c, []any{
		deleting(podA, ipA, grace, ms(60000), ms(60010)),
		signal(cgA, initPID+5, 15, true, "server", ms(60020)),
		exited(cgA, initPID+5, 0, 0, true, ms(60500)),
		gone(podA, ms(61000)),
	}, ms(66000))
	if !got.Marks.StopSignal.Equal(ms(60020)) || got.ExitCode != 0 {
		t.Errorf("stop signal %v exit %d, want the second container's", got.Marks.StopSignal.Sub(t0), got.ExitCode)
	}
}

// A pod deleted while pending never ran: no termination is reported, and
// a replayed update after completion starts none.
func TestPendingPodDeletedIsNotReported(t *testing.T) {
	c := New(Config{})
	pending := podOf(podA, ipA, 30*time.Second, false)
	del := pending
	del.DeletionTimestamp, del.DeletionGracePeriod = ms(30000), 30*time.Second
	feed(c, []any{
		collector.PodUpdate{Seen: ms(0), Pod: pending},
		collector.PodUpdate{Seen: ms(10), Pod: del},
		gone(podA, ms(20)),
	})
	if done := c.Tick(ms(40000)); len(done) != 0 {
		t.Fatalf("a pending pod's deletion was reported: %+v", done[0])
	}
	feed(c, []any{collector.PodUpdate{Seen: ms(10), Pod: del}})
	if len(c.Terminations()) != 0 || len(c.Tick(ms(80000))) != 0 {
		t.Errorf("a replay after completion started a termination")
	}
}

// A daemon that saw the pod already running cannot know its listeners:
// two are open, the first close is not the last; the last close of the
// termination stands for listener_closed.
func TestListenerCountUnknown(t *testing.T) {
	grace := 30 * time.Second
	evs := []any{
		collector.PodUpdate{Seen: ms(-60000), Pod: podOf(podA, ipA, grace, true)},
		bind{podA, netA, cgA},
		deleting(podA, ipA, grace, ms(-20), ms(-10)),
		signal(cgA, initPID, 15, true, "server", ms(0)),
		sock(collector.EventListenClose, netA, ipA, 2, ms(300)),
		sock(collector.EventListenClose, netA, ipA, 1, ms(1600)),
		exited(cgA, initPID, 0, 0, true, ms(1700)),
		gone(podA, ms(1800)),
	}
	got := finish(t, New(Config{}), evs, ms(6800))
	if !got.Marks.ListenerClosed.Equal(ms(1600)) {
		t.Errorf("listener_closed = %v, want +1.6s", got.Marks.ListenerClosed.Sub(t0))
	}
}

// With every listener known, listener_closed is when the last one closed,
// not the first.
func TestLastOfKnownListeners(t *testing.T) {
	grace := 30 * time.Second
	evs := []any{
		born(podA, ipA, netA, cgA, grace, ms(-60000)),
		sock(collector.EventListenOpen, netA, ipA, 1, ms(-59000)),
		sock(collector.EventListenOpen, netA, ipA, 2, ms(-59000)),
		deleting(podA, ipA, grace, ms(-20), ms(-10)),
		signal(cgA, initPID, 15, true, "server", ms(0)),
		sock(collector.EventListenClose, netA, ipA, 2, ms(1200)),
		sock(collector.EventListenClose, netA, ipA, 1, ms(1500)),
		exited(cgA, initPID, 0, 0, true, ms(1700)),
		gone(podA, ms(1800)),
	}
	got := finish(t, New(Config{}), evs, ms(6800))
	if !got.Marks.ListenerClosed.Equal(ms(1500)) || codes(got)[0] != DiagClean {
		t.Errorf("listener_closed = %v diagnoses %v, want +1.5s clean", got.Marks.ListenerClosed.Sub(t0), codes(got))
	}
}

// Servers bind their listeners to the wildcard (nginx's `listen 8080` and
// Node.js on 0.0.0.0, Go's ":8080" on ::): those events name no pod
// address and are the pod's by its namespace. An IPv4 wildcard listener
// was left unattributed once, so nginx and Node.js pods had no
// listener_closed mark.
func TestWildcardListeners(t *testing.T) {
	grace := 30 * time.Second
	for _, wild := range []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()} {
		evs := []any{
			born(podA, ipA, netA, cgA, grace, ms(-60000)),
			sock(collector.EventListenOpen, netA, wild, 1, ms(-59000)),
			deleting(podA, ipA, grace, ms(-20), ms(-10)),
			signal(cgA, initPID, 15, true, "server", ms(0)),
			sock(collector.EventListenClose, netA, wild, 1, ms(1200)),
			exited(cgA, initPID, 0, 0, true, ms(1700)),
			gone(podA, ms(1800)),
		}
		c := New(Config{})
		got := finish(t, c, evs, ms(6800))
		if !got.Marks.ListenerClosed.Equal(ms(1200)) {
			t.Errorf("listener on %v: listener_closed = %v, want +1.2s", wild, got.Marks.ListenerClosed.Sub(t0))
		}
	}
}

// Two containers stopped in parallel, the proxy with its own stop signal
// (SIGQUIT): the stop signal is the first matching one sent to an init, a
// SIGTERM to the proxy's init is not its stop signal, and the exit mark is
// the last init's exit. The termination waits for both inits.
func TestTwoContainersOwnStopSignals(t *testing.T) {
	grace := 30 * time.Second
	two := func(started bool) collector.Pod {
		p := podOf(podA, ipA, grace, started)
		proxy := collector.Container{Name: "proxy", StopSignal: 3}
		if started {
			proxy.ID = strings.Repeat("d", 64)
		}
		p.Containers = append(p.Containers, proxy)
		return p
	}
	del := two(true)
	del.DeletionTimestamp, del.DeletionGracePeriod = ms(-20).Add(grace), grace
	c := New(Config{})
	feed(c, []any{
		collector.PodUpdate{Seen: ms(-60000), Pod: two(false)},
		bind{podA, netA, cgA},
		collector.PodUpdate{Seen: ms(-59999), Pod: two(true)},
		collector.PodUpdate{Seen: ms(-10), Pod: del},
	})
	c.BindCgroup(podA, "proxy", cgB)
	feed(c, []any{
		fromContainer(signal(cgB, initPID+10, 15, true, "envoy", ms(0)), cgA), // a process of the pod: not the runtime
		signal(cgB, initPID+10, 3, true, "envoy", ms(1)),
		signal(cgA, initPID, 15, true, "server", ms(2)),
		exited(cgA, initPID, 0, 0, true, ms(1000)),
		gone(podA, ms(1100)),
	})
	if done := c.Tick(ms(6100)); len(done) != 0 {
		t.Fatalf("completed before the proxy's init exited")
	}
	got := finish(t, c, []any{exited(cgB, initPID+10, 0, 0, true, ms(1200))}, ms(6100))
	if !got.Marks.StopSignal.Equal(ms(1)) || got.StopSignal != 3 || !got.Marks.Exit.Equal(ms(1200)) {
		t.Errorf("stop signal %d at %v, exit at %v; want 3 at +1ms, exit at +1.2s",
			got.StopSignal, got.Marks.StopSignal.Sub(t0), got.Marks.Exit.Sub(t0))
	}
}

// A termination completed before the snapshot is neither completed again
// nor restarted by the replay of its events; its record is the daemon's
// (Tick returned it), the restored correlator no longer lists it.
func TestRestoreAfterCompletion(t *testing.T) {
	evs := flatten(naive())
	c := New(Config{})
	finish(t, c, evs, ms(7600))
	snap, err := c.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	after := New(Config{})
	if err := after.Restore(snap); err != nil {
		t.Fatal(err)
	}
	feed(after, evs)
	if done := after.Tick(ms(20000)); len(done) != 0 {
		t.Fatalf("the replay completed %d terminations again", len(done))
	}
	if ts := after.Terminations(); len(ts) != 0 {
		t.Errorf("Terminations after restore = %+v", ts)
	}
}

// The network namespace destroyed before the API delete is pod_gone; a
// namespace destroyed under a pod that is not terminating is a new sandbox.
func TestNetnsGoneIsPodGone(t *testing.T) {
	grace := 30 * time.Second
	c := New(Config{})
	feed(c, born(podB, ipB, netB, cgB, grace, ms(-60000)))
	c.NetnsGone(netB, ms(-1000))
	feed(c, []any{
		born(podA, ipA, netA, cgA, grace, ms(-60000)),
		deleting(podA, ipA, grace, ms(-20), ms(-10)),
		signal(cgA, initPID, 15, true, "server", ms(0)),
		exited(cgA, initPID, 0, 0, true, ms(300)),
	})
	c.NetnsGone(netA, ms(400))
	got := finish(t, c, []any{gone(podA, ms(2000))}, ms(5400))
	if got.PodUID != podA || !got.Marks.PodGone.Equal(ms(400)) {
		t.Errorf("%s pod_gone %v, want pod A at +0.4s", got.PodUID, got.Marks.PodGone.Sub(t0))
	}
	if _, ok := c.Get(podB); ok {
		t.Errorf("a new sandbox began a termination")
	}
}

// A crash-looping container gets a new cgroup at every restart: the index
// keeps only the current one, so it does not grow with the restarts.
func TestRestartedContainerForgetsOldCgroup(t *testing.T) {
	c := New(Config{})
	feed(c, []any{born(podA, ipA, netA, cgA, 30*time.Second, ms(-60000))})
	before := len(c.idx.Cgroups)
	for i := uint64(1); i <= 5; i++ {
		feed(c, []any{bind{podA, 0, cgA + 100*i}})
	}
	if got := len(c.idx.Cgroups); got != before {
		t.Fatalf("index holds %d cgroups after 5 restarts, want %d", got, before)
	}
	if ref := c.idx.Cgroups[cgA+500]; ref.UID != podA || ref.Container != "app" {
		t.Fatalf("current cgroup maps to %+v, want pod A's app", ref)
	}
}

func TestKeepRevision(t *testing.T) {
	web4 := collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: "4"}
	webUnknown := collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web"}
	other := collector.Workload{Namespace: "shop", Kind: "StatefulSet", Name: "db"}
	for _, tt := range []struct {
		name       string
		known, now collector.Workload
		want       collector.Workload
	}{
		{"first resolution", collector.Workload{}, web4, web4},
		{"lookup failed later", web4, webUnknown, web4},
		{"another owner", web4, other, other},
		{"rollback changes the revision", web4, collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: "7"},
			collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: "7"}},
	} {
		if got := keepRevision(tt.known, tt.now); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
