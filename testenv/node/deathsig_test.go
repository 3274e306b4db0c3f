package node_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
	"github.com/drainwatch/drainwatch/testenv/node"
	"github.com/drainwatch/drainwatch/testenv/workload"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// helperEnv makes the test binary a bare node agent (see helperAgent).
const helperEnv = "DW_NODE_HELPER"

// helperAgent runs one agent named by $DW_NODE_HELPER against the API
// server of $KUBECONFIG, prints READY and blocks until it is killed.
func helperAgent() int {
	log := zerolog.New(os.Stderr)
	rc, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		log.Error().Err(err).Msg("helper kubeconfig")
		return 1
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		log.Error().Err(err).Msg("helper client")
		return 1
	}
	_, err = node.Start(context.Background(), node.Config{Name: os.Getenv(helperEnv), Index: 0, Client: client,
		Images: map[string]node.Image{workload.ImageName: {Entrypoint: os.Getenv("DW_SERVER")}}, Logger: log})
	if err != nil {
		log.Error().Err(err).Msg("helper agent")
		return 1
	}
	fmt.Println("READY")
	select {}
}

// TestAgentDeathKillsContainers: when the agent's process is SIGKILLed
// (no cleanup runs), its containers die with it (PR_SET_PDEATHSIG), and
// Sweep removes the namespaces it left.
func TestAgentDeathKillsContainers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-death-api") // for the namespace, client and dwserver build
	cmd := exec.CommandContext(ctx, os.Args[0])
	name := uniqueName("t-death")
	cmd.Env = append(os.Environ(), helperEnv+"="+name, "KUBECONFIG="+cptest.Get(t).Kubeconfig, "DW_SERVER="+dwserver.path)
	cmd.Stderr = os.Stderr
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "READY\n" {
		t.Fatalf("helper agent said %q", line)
	}
	pod := l.serverPod("orphan", "ignore-term", 30, nil)
	pod.Spec.NodeName = name
	created, h := l.create(t, ctx, pod)
	ready := h.until(t, ctx, "Ready", podReady)
	id := strings.TrimPrefix(ready.Status.ContainerStatuses[0].ContainerID, "containerd://")
	root, _ := node.Cgroup2Mount()
	scope := filepath.Join(root, node.ContainerScope(corev1.PodQOSBestEffort, created.UID, id))
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // cleanups run last-in first-out: the agent must be dead first
		removeSlice(t, name, filepath.Dir(scope))
	})
	pids := cgroupPIDs(t, scope)
	if len(pids) != 2 { // the shell (PID 1) and the server under it
		t.Fatalf("container cgroup holds %v, want the shell and the server", pids)
	}
	prober := childByComm(t, cmd.Process.Pid, node.KubeletBinary)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	for i := 0; i < 50 && (len(cgroupPIDs(t, scope)) > 0 || alive(prober)); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if left := cgroupPIDs(t, scope); len(left) > 0 {
		t.Fatalf("processes %v survived their agent", left)
	}
	if alive(prober) {
		t.Fatalf("the kubelet prober (pid %d) survived its agent", prober)
	}
	removed, err := node.Sweep(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 2 { // the node's and the pod's namespaces
		t.Fatalf("Sweep removed %v, want the node and pod namespaces", removed)
	}
}

// removeSlice removes a dead agent's pod slice and its scopes (what
// Sweep leaves for a minute), and its namespaces if the test stopped early.
func removeSlice(t *testing.T, nodeName string, slice string) {
	for i := 0; i < 50 && populated(slice); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	_, _ = node.Sweep(nodeName)
	leftovers, _ := filepath.Glob(filepath.Join(slice, "*.scope"))
	for _, p := range append(leftovers, slice) {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			t.Error(err)
		}
	}
}

func cgroupPIDs(t *testing.T, cg string) []int {
	t.Helper()
	f, err := os.Open(filepath.Join(cg, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var pids []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if n, err := strconv.Atoi(sc.Text()); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

func populated(cg string) bool {
	b, _ := os.ReadFile(filepath.Join(cg, "cgroup.events"))
	return strings.Contains(string(b), "populated 1")
}

// childByComm finds the one child of ppid whose comm is comm.
func childByComm(t *testing.T, ppid int, comm string) int {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var found []int
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces, so cut at the last ')'.
		open, end := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
		fields := strings.Fields(string(b[end+1:]))
		if open < 0 || len(fields) < 2 || string(b[open+1:end]) != comm || fields[1] != strconv.Itoa(ppid) {
			continue
		}
		pid, _ := strconv.Atoi(strings.Fields(string(b))[0])
		found = append(found, pid)
	}
	if len(found) != 1 {
		t.Fatalf("children of %d named %s: %v, want one", ppid, comm, found)
	}
	return found[0]
}

// alive says whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
