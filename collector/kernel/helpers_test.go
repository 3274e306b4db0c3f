package kernel

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// openTestKernel loads the probes for a privileged test and closes them at
// its end. Every probe must attach on the kernels CI runs.
func openTestKernel(t testing.TB, opts Options) *Kernel {
	t.Helper()
	privileged.RequireRoot(t)
	privileged.RequireFile(t, kernelBTFPath, "kernel BTF")
	if opts.Logger.GetLevel() != zerolog.Disabled {
		opts.Logger = zerolog.New(zerolog.NewTestWriter(t)).With().Timestamp().Logger()
	}
	k, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k.Close(); err != nil {
			t.Error(err)
		}
	})
	for _, p := range k.Probes() {
		if !p.Attached() {
			t.Fatalf("probe %s (%s) not attached: %s", p.Name, p.Hook, p.Detail)
		}
	}
	return k
}

// collect reads events until stop returns true for the events so far, the
// channel closes or the deadline passes (a bound, not an assertion: the
// caller checks exact counts afterwards).
func collect(k *Kernel, within time.Duration, stop func([]collector.Event) bool) []collector.Event {
	var evs []collector.Event
	deadline := time.After(within)
	for {
		select {
		case ev, ok := <-k.Events():
			if !ok {
				return evs
			}
			evs = append(evs, ev)
			if stop != nil && stop(evs) {
				return evs
			}
		case <-deadline:
			return evs
		}
	}
}

// drain collects whatever arrives until the stream has been quiet for quiet.
func drain(k *Kernel, quiet time.Duration) []collector.Event {
	var evs []collector.Event
	for {
		select {
		case ev, ok := <-k.Events():
			if !ok {
				return evs
			}
			evs = append(evs, ev)
		case <-time.After(quiet):
			return evs
		}
	}
}

// countType counts events of one type, optionally only in one netns.
func countType(evs []collector.Event, typ collector.EventType, netns uint32) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ && (netns == 0 || ev.NetnsIno == netns) {
			n++
		}
	}
	return n
}

// killAndCollect SIGKILLs the server cmd and returns the kernel's events
// until its exit in the watched netns srv, and for half a second of quiet
// after it (its connections' teardown).
func killAndCollect(t *testing.T, k *Kernel, cmd *exec.Cmd, srv uint32) []collector.Event {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	evs := collect(k, 10*time.Second, func(evs []collector.Event) bool { return countType(evs, collector.EventExit, srv) > 0 })
	return append(evs, drain(k, 500*time.Millisecond)...)
}
