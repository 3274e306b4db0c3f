package e2e_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// TestRSSWith110Pods runs the real `drainwatch run` binary for a node with
// 110 running pods (the kubelet's default maximum) and reports its resident
// memory once it has seen and watched them. It measures; the only
// assertion is a generous ceiling that catches a leak of cached objects.
func TestRSSWith110Pods(t *testing.T) {
	if testing.Short() {
		t.Skip("110 pods take a minute to start")
	}
	privileged.RequireRoot(t)
	cp := cptest.Get(t)
	warn := zerolog.New(zerolog.NewConsoleWriter(func(w *zerolog.ConsoleWriter) { w.Out = os.Stderr })).Level(zerolog.WarnLevel)
	c := cluster.StartT(t, cluster.Options{Nodes: 1, NodePrefix: unique("e2m") + "-", ControlPlane: cp, Log: warn, Dir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := buildDrainwatch(ctx, t)
	cmd := exec.CommandContext(ctx, bin, "run", "--node-name", c.NodeNames[0], "--kubeconfig", c.Kubeconfig,
		"--state-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--log-level", "debug", "--pin-path=")
	logf, err := os.Create(filepath.Join(t.TempDir(), "drainwatch.log"))
	must(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	must(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })

	ns := unique("e2e-rss")
	dep := cluster.ServerDeployment(ns, "sleepers", "naive", 110)
	ctr := &dep.Spec.Template.Spec.Containers[0]
	ctr.Image, ctr.Args, ctr.ReadinessProbe = "local:/bin/sleep", []string{"infinity"}, nil
	must(t, c.Apply(ctx, cluster.Namespace(ns), dep, cluster.ServiceFor(ns, "sleepers")))
	start := time.Now()
	if _, err := c.WaitRolledOut(ctx, ns, "sleepers"); err != nil {
		t.Fatal(err)
	}
	t.Logf("110 pods running after %v", time.Since(start).Round(time.Second))
	time.Sleep(10 * time.Second) // scans, binds, a few checkpoints
	rss, hwm := procMemory(t, cmd.Process.Pid)
	logText, err := os.ReadFile(logf.Name())
	must(t, err)
	if n := strings.Count(string(logText), "watching pod network namespace\""); n != 110 {
		t.Errorf("the daemon watches %d pod network namespaces, want 110", n)
	}
	t.Logf("drainwatch run with 110 pods on its node: VmRSS %d MiB, VmHWM %d MiB (log %s)", rss>>10, hwm>>10, logf.Name())
	if rss > 200<<10 {
		t.Errorf("VmRSS %d KiB, want under 200 MiB", rss)
	}
}

// buildDrainwatch builds the command into a temporary directory.
func buildDrainwatch(ctx context.Context, t *testing.T) string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	must(t, err)
	bin := filepath.Join(t.TempDir(), "drainwatch")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/drainwatch")
	build.Dir = root
	out, err := build.CombinedOutput()
	if err != nil {
		t.Fatalf("building drainwatch in %s: %v\n%s", root, err, out)
	}
	return bin
}

// procMemory returns VmRSS and VmHWM of pid in KiB.
func procMemory(t *testing.T, pid int) (rss, hwm int) {
	t.Helper()
	m := procStatus(t, pid)
	// Anonymous (heap, stacks, the ring buffer's pages) and file-backed
	// (the executable's pages) apart: they shrink by different changes.
	t.Logf("RssAnon %d KiB, RssFile %d KiB, RssShmem %d KiB", m["RssAnon:"], m["RssFile:"], m["RssShmem:"])
	return m["VmRSS:"], m["VmHWM:"]
}

// procStatus reads the KiB fields of /proc/PID/status.
func procStatus(t *testing.T, pid int) map[string]int {
	t.Helper()
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	must(t, err)
	defer f.Close()
	m := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 {
			if n, err := strconv.Atoi(fields[1]); err == nil {
				m[fields[0]] = n
			}
		}
	}
	return m
}

func must(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
