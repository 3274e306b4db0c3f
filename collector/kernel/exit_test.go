package kernel

import (
	"syscall"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// TestExitOncePerProcess: SIGKILL to multi-threaded processes makes all
// their threads exit at once; each process must still give exactly one
// exit event (the thread group's), with 137/SIGKILL, from either source:
// group_dead, or the fallback for kernels without it (signal->live, which
// every thread of the group may see at 0), forced on this kernel.
func TestExitOncePerProcess(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"group_dead", Options{}},
		{"live_fallback", Options{ExitFallback: true}},
	} {
		t.Run(tc.name, func(t *testing.T) { exitOncePerProcess(t, tc.opts) })
	}
}

func exitOncePerProcess(t *testing.T, opts Options) {
	const procs = 6
	py := requirePython(t)
	k := openTestKernel(t, opts)
	want := map[bool]ProbeState{false: ProbeAttached, true: ProbeFallback}[opts.ExitFallback]
	if got := probeState(k, "exit"); got != want {
		t.Fatalf("exit probe %s, want %s: %+v", got, want, k.Probes())
	}
	cg, id := newCgroup(t)
	if err := k.WatchCgroup(id); err != nil {
		t.Fatal(err)
	}
	threaded := "import threading, time\n" +
		"for _ in range(16): threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n" +
		"print('ready', flush=True); time.sleep(60)\n"
	pids := map[uint32]bool{}
	for i := 0; i < procs; i++ {
		cmd := startInCgroup(t, cg, py, "-c", threaded)
		pids[uint32(cmd.Process.Pid)] = true
		defer func() { _ = cmd.Wait() }()
	}
	time.Sleep(500 * time.Millisecond) // let the threads start (a wait, not an assertion)
	for pid := range pids {
		_ = syscall.Kill(int(pid), syscall.SIGKILL)
	}
	evs := collect(k, 10*time.Second, func(evs []collector.Event) bool { return len(exitsOf(evs, pids)) >= procs })
	evs = append(evs, drain(k, 500*time.Millisecond)...)
	exits := map[uint32]int{}
	for _, ev := range evs {
		// Other exits in the cgroup are helpers a python3 wrapper (pyenv
		// shim) may run before exec.
		if ev.Type != collector.EventExit || !pids[ev.PID] {
			continue
		}
		exits[ev.PID]++
		if ev.ExitCode != 137 || ev.ExitSignal != 9 {
			t.Errorf("exit %+v: want 137/9", ev)
		}
	}
	for pid := range pids {
		if exits[pid] != 1 {
			t.Errorf("pid %d: %d exit events, want 1", pid, exits[pid])
		}
	}
}

func exitsOf(evs []collector.Event, pids map[uint32]bool) map[uint32]bool {
	seen := map[uint32]bool{}
	for _, ev := range evs {
		if ev.Type == collector.EventExit && pids[ev.PID] {
			seen[ev.PID] = true
		}
	}
	return seen
}

// probeState is the state the named probe started in.
func probeState(k *Kernel, name string) ProbeState {
	for _, p := range k.Probes() {
		if p.Name == name {
			return p.State
		}
	}
	return ProbeUnavailable
}
