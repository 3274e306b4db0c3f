package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// cli builds this command once per test and returns a runner for it.
func cli(t *testing.T) func(args ...string) (string, error) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts whole clusters")
	}
	privileged.RequireRoot(t)
	if _, err := controlplane.BinDir(); err != nil {
		if privileged.InCI() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	bin := filepath.Join(t.TempDir(), "testenv")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building testenv: %v: %s", err, out)
	}
	return func(args ...string) (string, error) {
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}
}

// processesUnder lists pids whose command line mentions dir.
func processesUnder(dir string) []string {
	var pids []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), dir) {
			pids = append(pids, strings.Split(p, "/")[2])
		}
	}
	return pids
}

// Node prefixes are unique per test so a sweep never touches another
// cluster's namespaces (a developer's `testenv up` uses lab-).

// TestUpStatusDown: up returns with KUBECONFIG=, kubectl sees the node,
// status reports it Ready, down leaves no process, namespace or directory.
func TestUpStatusDown(t *testing.T) {
	run := cli(t)
	dir := filepath.Join(t.TempDir(), "state")
	out, err := run("up", "--nodes", "1", "--dir", dir, "--node-prefix", "cli-a-")
	if err != nil || !strings.HasPrefix(out, "KUBECONFIG=") {
		t.Fatalf("up: %v: %s", err, out)
	}
	t.Cleanup(func() { run("down", "--dir", dir) })
	kubeconfig := strings.TrimSpace(strings.TrimPrefix(out, "KUBECONFIG="))
	bin, _ := controlplane.BinDir()
	nodes, err := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", kubeconfig, "get", "nodes", "-o", "name").CombinedOutput()
	if err != nil || strings.TrimSpace(string(nodes)) != "node/cli-a-1" {
		t.Fatalf("kubectl get nodes: %v: %q", err, nodes)
	}
	if out, err := run("status", "--dir", dir); err != nil || !strings.Contains(out, "node cli-a-1 Ready podCIDR 10.244.1.0/24") {
		t.Fatalf("status: %v: %s", err, out)
	}
	s, err := readState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run("down", "--dir", dir); err != nil {
		t.Fatalf("down: %v: %s", err, out)
	}
	checkGone(t, dir, s)
}

// TestDownAfterSupervisorKilled: SIGKILL the supervisor; its children die
// with it (Pdeathsig) and down sweeps the namespaces it left.
func TestDownAfterSupervisorKilled(t *testing.T) {
	run := cli(t)
	dir := filepath.Join(t.TempDir(), "state")
	if out, err := run("up", "--nodes", "1", "--dir", dir, "--node-prefix", "cli-b-"); err != nil {
		t.Fatalf("up: %v: %s", err, out)
	}
	t.Cleanup(func() { run("down", "--dir", dir) })
	s, err := readState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(s.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50 && len(processesUnder(dir)) > 0; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if pids := processesUnder(dir); len(pids) > 0 {
		t.Fatalf("processes still running after the supervisor was killed: %v", pids)
	}
	if out, err := run("status", "--dir", dir); err == nil {
		t.Fatalf("status succeeded with the supervisor dead: %s", out)
	}
	out, err := run("down", "--dir", dir)
	if err != nil || !strings.Contains(out, "swept leftovers: "+s.Fabric) {
		t.Fatalf("down: %v: %s", err, out)
	}
	checkGone(t, dir, s)
}

func checkGone(t *testing.T, dir string, s state) {
	t.Helper()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state dir %s still exists", dir)
	}
	if pids := processesUnder(dir); len(pids) > 0 {
		t.Errorf("processes left: %v", pids)
	}
	left, _ := filepath.Glob("/run/netns/" + s.Fabric)
	nodes, _ := filepath.Glob("/run/netns/*node-" + s.Nodes[0] + "-*")
	if len(left)+len(nodes) > 0 {
		t.Errorf("namespaces left: %v %v", left, nodes)
	}
}
