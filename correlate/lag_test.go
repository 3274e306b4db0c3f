package correlate

import (
	"testing"
	"time"
)

// The soak's exit_not_seen (issue 16): on a loaded node the loop processed
// the pod's deletion seconds after the informer stamped it. The kernel's
// stop signal, the listener's close and the exit were processed first,
// into a termination the stop signal began, and a Tick more than
// SignalLead after the stop signal (by the loop's clock) dropped it as a
// container restart. The late deletion began a new termination: the stop
// signal came back from the Early ring, the close and the exit did not.
func TestAPILagKeepsTheExit(t *testing.T) {
	// Seen before the stop signal (16 of the soak's 21) and after it (5).
	for _, seen := range []int{-80, 173} {
		grace := 30 * time.Second
		c := New(Config{})
		feed(c, born(podA, ipA, netA, cgA, grace, ms(-60000)))
		feed(c, []any{
			signal(cgA, initPID, 15, true, "server", ms(0)),
			closeListener(netA, ms(4)),
			exited(cgA, initPID, 0, 0, true, ms(20)),
		})
		for at := 250; at <= 7000; at += 250 {
			if done := c.Tick(ms(at)); len(done) != 0 {
				t.Fatalf("Tick(%d ms) completed %d terminations while the deletion waits", at, len(done))
			}
		}
		got := finish(t, c, []any{
			deleting(podA, ipA, grace, ms(-1000), ms(seen)),
			gone(podA, ms(7100)),
		}, ms(40000))
		m := got.Marks
		if !m.StopSignal.Equal(ms(0)) || !m.ListenerClosed.Equal(ms(4)) || !m.Exit.Equal(ms(20)) || got.Partial {
			t.Errorf("seen %d ms: stop signal %v listener closed %v exit %v partial %v %v, want 0s 4ms 20ms complete",
				seen, m.StopSignal.Sub(t0), m.ListenerClosed.Sub(t0), m.Exit.Sub(t0), got.Partial, got.PartialReasons)
		}
	}
}

// A restart while the pod watch is silent is not dropped by Tick; the
// next restart's stop signal ends it (its own record), and a deletion
// requested after it still tells it from the pod's termination, with the
// kernel ahead of the API.
func TestRestartDuringSilentWatch(t *testing.T) {
	grace := 30 * time.Second
	c := New(Config{})
	feed(c, []any{
		born(podA, ipA, netA, cgA, grace, ms(-60000)),
		signal(cgA, initPID, 15, true, "server", ms(0)),
		exited(cgA, initPID, 143, 15, true, ms(100)),
		signal(cgA, initPID+5, 15, true, "server", ms(60020)),
		exited(cgA, initPID+5, 0, 0, true, ms(60030)),
		deleting(podA, ipA, grace, ms(60000), ms(60010)),
		gone(podA, ms(61000)),
	})
	done := c.Tick(ms(61000).Add(DefaultConfig().KernelTail))
	if len(done) != 2 {
		t.Fatalf("Tick completed %d terminations, want the restart and the deletion", len(done))
	}
	restart, got := done[0], done[1]
	if !restart.Marks.Exit.Equal(ms(100)) || restart.Cause != CauseContainerRestart || restart.Partial {
		t.Errorf("restart: exit %v cause %q partial %v, want 100ms container_restart complete",
			restart.Marks.Exit.Sub(t0), restart.Cause, restart.PartialReasons)
	}
	if !got.Marks.StopSignal.Equal(ms(60020)) || !got.Marks.Exit.Equal(ms(60030)) || got.ExitCode != 0 || got.Partial {
		t.Errorf("stop signal %v exit %v code %d partial %v, want the second container's, complete",
			got.Marks.StopSignal.Sub(t0), got.Marks.Exit.Sub(t0), got.ExitCode, got.PartialReasons)
	}
}
