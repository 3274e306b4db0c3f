package correlate

import (
	"slices"
	"testing"
	"time"
)

// TestSandboxTeardown: on a real node the kubelet stops the pod's sandbox
// once its container exited, and containerd SIGKILLs the pause process (in
// the pod's netns, in no container's cgroup, PID 1 of its own PID
// namespace), which exits 137. Measured on testenv's real node: without
// this rule every termination there read exit 137 and
// grace_period_exceeded. The container's own exit (0) and the absence of
// SIGKILL stand.
func TestSandboxTeardown(t *testing.T) {
	const pausePID = initPID + 7
	grace := 30 * time.Second
	// The pause process is attributed by netns only: its cgroup is no container's.
	killPause := kill(0, pausePID, 900, 0, true, ms(500))
	killPause.NetnsIno = netA
	pauseExit := exited(0, pausePID, 137, 9, true, ms(505))
	pauseExit.NetnsIno = netA
	evs := []any{
		born(podA, ipA, netA, cgA, grace, ms(-60000)),
		deleting(podA, ipA, grace, ms(-20), ms(-10)),
		killing(podA, ms(-5)),
		signal(cgA, initPID, 15, true, "server", ms(0)),
		exited(cgA, initPID, 0, 0, true, ms(100)),
		killPause, pauseExit,
		finalDelete(podA, ipA, grace, ms(-20), ms(600)),
		gone(podA, ms(700)),
	}
	got := finish(t, New(Config{}), evs, ms(60000))
	if !got.Marks.Sigkill.IsZero() || got.ExitCode != 0 || !got.Marks.Exit.Equal(ms(100)) {
		t.Errorf("sigkill %v, exit %d at %v: want no SIGKILL, the container's exit 0 at 100 ms",
			got.Marks.Sigkill, got.ExitCode, got.Marks.Exit.Sub(t0))
	}
	if slices.Contains(codes(got), DiagGraceExceeded) {
		t.Errorf("diagnoses %v: the sandbox's SIGKILL is not the grace running out", codes(got))
	}
}
