package kernel

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// TestSigtermRealServer: CPython's http.server in a watched namespace gets
// SIGTERM, has no handler and dies of it. The kernel shows the signal to
// the right target, the exit with status 143/SIGTERM, and its listener
// closing (by the exit, which closes the process's files after the exit
// tracepoint).
func TestSigtermRealServer(t *testing.T) {
	py := requirePython(t)
	l := newLab(t)
	k := openTestKernel(t, Options{})
	srv := l.server.Inode()
	if err := k.WatchNetns(srv); err != nil {
		t.Fatal(err)
	}
	cmd := l.startServer(t, 8080, py, "-m", "http.server", "8080", "--bind", serverIP)
	pid := uint32(cmd.Process.Pid)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signal() != syscall.SIGTERM {
		t.Fatalf("server wait status %v, want killed by SIGTERM", ws)
	}
	evs := collect(k, 10*time.Second, func(evs []collector.Event) bool { return countType(evs, collector.EventListenClose, srv) > 0 })
	evs = append(evs, drain(k, 300*time.Millisecond)...)
	sig, exit, closed := findProcessEvents(t, evs, pid)
	if sig.Signal != 15 || sig.SenderPID != uint32(os.Getpid()) || sig.TargetInit || sig.SignalResult != collector.SignalDelivered {
		t.Errorf("signal event %+v: want SIGTERM delivered from pid %d", sig, os.Getpid())
	}
	if exit.ExitCode != 143 || exit.ExitSignal != 15 || exit.NetnsIno != srv {
		t.Errorf("exit event %+v: want code 143, signal 15, netns %d", exit, srv)
	}
	if closed.Local.String() != serverIP+":8080" {
		t.Errorf("listen_close local %v, want %s:8080", closed.Local, serverIP)
	}
	if !(sig.Time.Before(exit.Time) && !closed.Time.Before(exit.Time)) {
		t.Errorf("order: signal %v, exit %v, listen_close %v", sig.Time, exit.Time, closed.Time)
	}
}

// findProcessEvents returns the one SIGTERM to pid, pid's exit and the
// single listen_close, failing on duplicates or absence.
func findProcessEvents(t *testing.T, evs []collector.Event, pid uint32) (sig, exit, closed collector.Event) {
	t.Helper()
	var nsig, nexit, nclose int
	for _, ev := range evs {
		t.Logf("%s pid=%d sig=%d code=%d local=%v comm=%s sender=%d/%s", ev.Type, ev.PID, ev.Signal, ev.ExitCode, ev.Local, ev.Comm, ev.SenderPID, ev.SenderComm)
		switch {
		case ev.Type == collector.EventSignal && ev.PID == pid && ev.Signal == 15:
			sig, nsig = ev, nsig+1
		case ev.Type == collector.EventExit && ev.PID == pid:
			exit, nexit = ev, nexit+1
		case ev.Type == collector.EventListenClose:
			closed, nclose = ev, nclose+1
		}
	}
	if nsig != 1 || nexit != 1 || nclose != 1 {
		t.Fatalf("%d SIGTERM, %d exit, %d listen_close events for pid %d; want 1 each", nsig, nexit, nclose, pid)
	}
	return sig, exit, closed
}
