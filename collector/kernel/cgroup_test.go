package kernel

import (
	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/collector/node"

	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestCgroupScopedSignals: a namespace init (PID 1 of its own pid namespace,
// like a container's shell wrapper) in a watched cgroup ignores SIGTERM and
// dies of SIGKILL. The kernel reports both signals to that target with
// TargetInit, SIGTERM as ignored, and the exit as 137/SIGKILL. A process
// outside the cgroup is not reported.
func TestCgroupScopedSignals(t *testing.T) {
	k := openTestKernel(t, Options{})
	cg, id := newCgroup(t)
	if err := k.WatchCgroup(id); err != nil {
		t.Fatal(err)
	}
	init := startInCgroup(t, cg, "unshare", "--pid", "--fork", "--kill-child", "sleep", "60")
	outside := startInCgroup(t, "", "sleep", "60")
	child := waitChild(t, init.Process.Pid, "sleep")
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		if err := syscall.Kill(child, sig); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // let SIGTERM be ignored before SIGKILL
	}
	outside.Process.Signal(syscall.SIGTERM)
	evs := collect(k, 10*time.Second, func(evs []collector.Event) bool {
		return countType(evs, collector.EventExit, 0) > 0 && evs[len(evs)-1].PID == uint32(child)
	})
	evs = append(evs, drain(k, 300*time.Millisecond)...)
	var got []string
	for _, ev := range evs {
		if ev.CgroupID != id || ev.PID == uint32(outside.Process.Pid) {
			t.Errorf("event outside the watched cgroup: %+v", ev)
		}
		if ev.PID == uint32(child) {
			got = append(got, describe(ev))
		}
	}
	want := []string{"signal 15 ignored init", "signal 9 delivered init", "exit 137 9 init"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("events of the namespace init: %q, want %q", got, want)
	}
}

func describe(ev collector.Event) string {
	init := map[bool]string{true: "init", false: "not-init"}[ev.TargetInit]
	if ev.Type == collector.EventSignal {
		return "signal " + strconv.Itoa(int(ev.Signal)) + " " + ev.SignalResult.String() + " " + init
	}
	return ev.Type.String() + " " + strconv.Itoa(int(ev.ExitCode)) + " " + strconv.Itoa(int(ev.ExitSignal)) + " " + init
}

// newCgroup creates a cgroup v2 directory for the test and removes it after.
func newCgroup(t *testing.T) (string, uint64) {
	t.Helper()
	mnt, err := node.Cgroup2Mount()
	if err != nil {
		t.Fatal(err)
	}
	suffix := make([]byte, 3)
	rand.Read(suffix)
	dir := filepath.Join(mnt, "dwk-"+hex.EncodeToString(suffix))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	id, err := node.CgroupID(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, id
}

// startInCgroup starts a command directly in cgroup dir (CLONE_INTO_CGROUP),
// or in the test's own cgroup when dir is empty.
func startInCgroup(t *testing.T, dir string, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if dir != "" {
		f, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(f.Fd())
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// waitChild returns the pid of parent's only child once it runs comm,
// bounded in time. Not before its exec: util-linux's unshare blocks SIGTERM
// around its fork, and a SIGTERM its child gets before restoring the mask
// is queued ("delivered"), not ignored (seen once in CI).
func waitChild(t *testing.T, parent int, comm string) int {
	t.Helper()
	path := "/proc/" + strconv.Itoa(parent) + "/task/" + strconv.Itoa(parent) + "/children"
	for i := 0; i < 200; i++ {
		b, _ := os.ReadFile(path)
		if pid, err := strconv.Atoi(string(bytes.TrimSpace(b))); err == nil {
			if c, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); string(bytes.TrimSpace(c)) == comm {
				return pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no child of pid %d running %s within 2s", parent, comm)
	return 0
}

// TestListenerTasks: listen and the close of a listener run in the
// listening process's context, so their events carry its cgroup and pid:
// two CPython servers in one network namespace, each in its own cgroup
// (two containers of one pod), are told apart by them, at listen() and
// at the close their exit makes after SIGTERM.
func TestListenerTasks(t *testing.T) {
	py := requirePython(t)
	l := newLab(t)
	k := openTestKernel(t, Options{})
	srv := l.server.Inode()
	if err := k.WatchNetns(srv); err != nil {
		t.Fatal(err)
	}
	type server struct {
		port int
		cg   uint64
		pid  uint32
	}
	var servers []server
	for _, port := range []int{8080, 9090} {
		dir, id := newCgroup(t)
		f, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(py, "-m", "http.server", strconv.Itoa(port), "--bind", "0.0.0.0")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, UseCgroupFD: true, CgroupFD: int(f.Fd())}
		if err := l.server.Start(cmd); err != nil {
			t.Fatal(err)
		}
		f.Close()
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		l.waitListening(t, port)
		servers = append(servers, server{port, id, uint32(cmd.Process.Pid)})
		defer func() { _ = cmd.Process.Signal(syscall.SIGTERM) }()
	}
	for _, s := range servers {
		_ = syscall.Kill(int(s.pid), syscall.SIGTERM)
	}
	evs := collect(k, 10*time.Second, func(evs []collector.Event) bool {
		return countType(evs, collector.EventListenClose, srv) >= len(servers)
	})
	for _, s := range servers {
		var seen []collector.EventType
		for _, ev := range evs {
			if ev.Type != collector.EventListenOpen && ev.Type != collector.EventListenClose || int(ev.Local.Port()) != s.port {
				continue
			}
			seen = append(seen, ev.Type)
			if ev.CgroupID != s.cg || ev.PID != s.pid || ev.Comm.String() != "python3" {
				t.Errorf("%s of :%d: cgroup %d pid %d comm %q, want cgroup %d pid %d python3", ev.Type, s.port, ev.CgroupID, ev.PID, ev.Comm, s.cg, s.pid)
			}
		}
		if len(seen) != 2 || seen[0] != collector.EventListenOpen || seen[1] != collector.EventListenClose {
			t.Errorf("listen events of :%d: %v, want listen_open then listen_close", s.port, seen)
		}
	}
}
