package kernel

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector/node"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// TestProcessNetnsIsTheNamespaceFile: the task iterator reports, for a
// process in a network namespace of its own, for this process and for the
// host's init, the inode their /proc/<pid>/ns/net has.
func TestProcessNetnsIsTheNamespaceFile(t *testing.T) {
	privileged.RequireRoot(t)
	privileged.RequireFile(t, kernelBTFPath, "kernel BTF")
	child := exec.Command("unshare", "--net", "sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	var p ProcessNetns
	t.Cleanup(func() { p.Close() })
	var want, got map[int]uint32
	for attempt := 0; attempt < 50; attempt++ { // until unshare has run
		want = map[int]uint32{child.Process.Pid: nsInode(t, child.Process.Pid), os.Getpid(): nsInode(t, os.Getpid())}
		if want[child.Process.Pid] != want[os.Getpid()] {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	all, err := p.Read()
	if err != nil {
		t.Fatal(err)
	}
	got = map[int]uint32{}
	for pid := range want {
		got[pid] = all[pid]
	}
	// Kernel threads (pid 0 here) are in the initial namespace, which
	// this test runs in.
	if all[0] != want[os.Getpid()] {
		t.Errorf("kernel threads' namespace %d, want the initial one, this test's %d", all[0], want[os.Getpid()])
	}
	if len(all) < 3 || !maps.Equal(got, want) || want[child.Process.Pid] == want[os.Getpid()] {
		t.Errorf("task iterator %v (of %d processes), /proc/<pid>/ns/net %v", got, len(all), want)
	}
	t.Logf("%d processes; child %d in netns %d, this process %d, kernel threads %d", len(all), child.Process.Pid,
		got[child.Process.Pid], got[os.Getpid()], all[0])
}

func nsInode(t *testing.T, pid int) uint32 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+strconv.Itoa(pid)+"/ns/net", &st); err != nil {
		t.Fatal(err)
	}
	return uint32(st.Ino)
}

// TestPodNetnsWithoutPtrace: a daemon with only CAP_BPF and CAP_PERFMON
// (the DaemonSet's, without SYS_PTRACE) holds the network namespace of a
// process with more capabilities than it has, in a namespace of its own,
// and reads its inode, through node.OpenContainerNetns with the task
// iterator; /proc/<pid>/ns/net, the way before, is denied to it.
func TestPodNetnsWithoutPtrace(t *testing.T) {
	if os.Getenv(noPtraceChild) != "" {
		noPtraceBind(t)
		return
	}
	privileged.RequireRoot(t)
	privileged.RequireFile(t, kernelBTFPath, "kernel BTF")
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) runs the test without capabilities: %v", err)
	}
	pod := exec.Command("unshare", "--net", "sleep", "30")
	if err := pod.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pod.Process.Kill(); pod.Wait() })
	want := nsInode(t, pod.Process.Pid)
	for attempt := 0; attempt < 50 && want == nsInode(t, os.Getpid()); attempt++ {
		time.Sleep(20 * time.Millisecond) // until unshare has run
		want = nsInode(t, pod.Process.Pid)
	}
	cgroup := t.TempDir() // stands for the pod's cgroup: its cgroup.procs
	if err := os.WriteFile(filepath.Join(cgroup, "cgroup.procs"), []byte(strconv.Itoa(pod.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	child := exec.Command(setpriv, "--bounding-set=-all,+bpf,+perfmon", "--inh-caps=-all", "--",
		os.Args[0], "-test.run=^TestPodNetnsWithoutPtrace$", "-test.v")
	child.Env = append(os.Environ(), noPtraceChild+"="+cgroup, "DW_WANT_NETNS="+strconv.FormatUint(uint64(want), 10))
	out, err := child.CombinedOutput()
	if err != nil {
		t.Fatalf("without SYS_PTRACE: %v\n%s", err, out)
	}
	t.Logf("pod netns %d\n%s", want, out)
}

const noPtraceChild = "DW_NO_PTRACE_CGROUP"

// noPtraceBind is the child's side, with only CAP_BPF and CAP_PERFMON.
func noPtraceBind(t *testing.T) {
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "CapEff:") {
			t.Log(line)
			if v, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, "CapEff:")), 16, 64); v != 1<<capBPF|1<<capPerfmon {
				t.Fatalf("effective capabilities %#x, want CAP_BPF and CAP_PERFMON only", v)
			}
		}
	}
	cgroup := os.Getenv(noPtraceChild)
	want, _ := strconv.ParseUint(os.Getenv("DW_WANT_NETNS"), 10, 32)
	if _, _, ok, err := node.OpenContainerNetns("/proc", cgroup, nil); ok || err != nil {
		t.Fatalf("/proc/<pid>/ns/net without SYS_PTRACE: ok=%v err=%v; want denied (not ok), no error", ok, err)
	}
	var p ProcessNetns
	defer p.Close()
	f, ino, ok, err := node.OpenContainerNetns("/proc", cgroup, p.Read)
	if err != nil || !ok || ino != uint32(want) {
		t.Fatalf("OpenContainerNetns from the kernel = %d, %v, %v; want %d", ino, ok, err, want)
	}
	defer f.Close()
	t.Logf("held %s: netns %d", f.Name(), ino)
}

// TestHeldNetDevKeepsTheNamespace: /proc/<pid>/net/dev held open keeps the
// process's network namespace after the process is gone, so its inode is
// not given to the namespaces created next (it would be without: the
// kernel hands out the lowest free number).
func TestHeldNetDevKeepsTheNamespace(t *testing.T) {
	privileged.RequireRoot(t)
	pod := exec.Command("unshare", "--net", "sleep", "30")
	if err := pod.Start(); err != nil {
		t.Fatal(err)
	}
	own := nsInode(t, os.Getpid())
	held := nsInode(t, pod.Process.Pid)
	for attempt := 0; attempt < 50 && held == own; attempt++ {
		time.Sleep(20 * time.Millisecond) // until unshare has run
		held = nsInode(t, pod.Process.Pid)
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pod.Process.Pid) + "/net/dev")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pod.Process.Kill()
	pod.Wait()
	for i := 0; i < 10; i++ {
		out, err := exec.Command("unshare", "--net", "readlink", "/proc/self/ns/net").Output()
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(out)) == "net:["+strconv.FormatUint(uint64(held), 10)+"]" {
			t.Fatalf("namespace %d given to a new namespace while held", held)
		}
	}
	b := make([]byte, 4096)
	if n, err := f.Read(b); err != nil || !strings.Contains(string(b[:n]), "lo:") {
		t.Fatalf("the held namespace's /net/dev: %q, %v; want its loopback", b[:n], err)
	}
}
