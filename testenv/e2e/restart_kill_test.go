package e2e_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/drainwatch/drainwatch/collector/kernel"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/router"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// TestRolloutWithDaemonKilled is the rollout of TestRolloutWithDaemonRestart
// with the real `drainwatch run` binary, pinned, killed with SIGKILL (no
// final checkpoint) once it has seen the first old pod's deletion, and
// started again 2 s later. What it had read from the ring buffer since its
// last checkpoint is lost, so the termination in progress must be partial
// (daemon_down) and never count more than the router saw; the later
// terminations are exact; every pod has one termination.
//
// The downtime also covers what the killed run read after its last
// periodic checkpoint; no termination of the namespace ended in that span
// (the first old pod's is the first), so the pods overlapping [kill,
// restart] are exactly the partial ones.
func TestRolloutWithDaemonKilled(t *testing.T) {
	c, ds := startCluster(t, "e2k-", 1)
	node := ds[0].node
	ds[0].stop() // the binary below is this node's daemon
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pinPath := filepath.Join("/sys/fs/bpf", "drainwatch-e2e-"+rand.String(6))
	t.Cleanup(func() {
		if err := kernel.RemovePins(pinPath); err != nil {
			t.Error(err)
		}
	})
	bd := &binDaemon{bin: buildDrainwatch(ctx, t), args: []string{"run", "--node-name", node, "--kubeconfig", c.Kubeconfig,
		"--state-dir", t.TempDir(), "--pin-path", pinPath, "--log-level", "info", "--no-events"}, logDir: t.TempDir()}
	bd.start(ctx, t)

	ns := unique("e2e-rollout-kill")
	dep := cluster.ServerDeployment(ns, "web", workload.ModeNaive, 4)
	dep.Spec.Template.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: preStop}}}
	dep.Spec.MinReadySeconds = minReady
	dep.Spec.Strategy = oneAtATime()
	old := deploy(ctx, t, c, ns, dep)
	time.Sleep(time.Second) // the daemon binds the pods' scopes (200 ms scans)
	r, loadDone, first, held := restartUnderLoad(ctx, t, c, ns, old)
	bd.waitFor(ctx, t, ns, string(first.UID), func(t correlate.Termination) bool { return !t.Marks.DeletionSeen.IsZero() })
	bd.kill(t)
	down := time.Now()
	time.Sleep(downFor)
	up := time.Now()
	bd.start(ctx, t)
	if _, err := c.WaitRolledOut(ctx, ns, "web"); err != nil {
		t.Fatal(err)
	}
	reqs := <-loadDone
	checkHeld(t, first.Name, <-held)
	// The floor of TestRolloutWithDaemonRestart: the same scenario.
	requireRefusedInWindow(t, r, cluster.PodAddr(first, cluster.ServerPort), "while the daemon was down", down, up, restartRefusedFloor)
	checkKilled(ctx, t, bd, ns, r, old, overlappingDowntime(ctx, t, c, old, first, down, up), reqs)
}

func checkKilled(ctx context.Context, t *testing.T, bd *binDaemon, ns string, r *router.Router, old []corev1Pod, partial map[types.UID]bool, reqs []client.Request) {
	t.Helper()
	refusedBy := map[string]int{}
	for _, cn := range r.Conns() {
		if cn.Outcome == router.Refused {
			refusedBy[cn.Backend]++
		}
	}
	for i := range old {
		p := &old[i]
		got := bd.waitFor(ctx, t, ns, string(p.UID), func(t correlate.Termination) bool { return t.Complete })
		want := refusedBy[cluster.PodAddr(p, cluster.ServerPort)]
		n := got.Counts.RefusedAfterSigterm + got.Counts.RefusedBeforeSigterm
		t.Logf("%s: router refused %d, drainwatch %d, partial %v, diagnoses %v", p.Name, want, n, got.PartialReasons, codes(got))
		if !checkOne(t, p, got, n, want, partial[p.UID]) {
			dumpRouter(t, got, r, cluster.PodAddr(p, cluster.ServerPort))
		}
	}
	list, err := bd.api().Terminations(ctx, url.Values{"namespace": {ns}})
	if err != nil || len(list.Terminations) != len(old) {
		t.Errorf("the restarted daemon lists %d terminations (%v), want %d", len(list.Terminations), err, len(old))
	}
	t.Logf("rollout with the daemon killed: %d of %d terminations overlapped the downtime; client saw %s",
		len(partial), len(old), client.Summarize(reqs))
}

// binDaemon is the real `drainwatch run` binary, restarted on the same
// state dir and pin path.
type binDaemon struct {
	bin    string
	args   []string
	logDir string
	url    string
	cmd    *exec.Cmd
	runs   int
}

func (b *binDaemon) start(ctx context.Context, t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := l.Addr().String()
	l.Close()
	b.runs++
	logf, err := os.Create(filepath.Join(b.logDir, "drainwatch-"+string(rune('0'+b.runs))+".log"))
	must(t, err)
	b.url = "http://" + addr
	b.cmd = exec.Command(b.bin, append(b.args, "--listen", addr)...)
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	must(t, b.cmd.Start())
	cmd := b.cmd
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
		logf.Close()
	})
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.url+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("drainwatch run not ready at %s: %v (log %s)", b.url, err, logf.Name())
	}
}

// kill sends SIGKILL: no final checkpoint, the pins stay.
func (b *binDaemon) kill(t *testing.T) {
	t.Helper()
	must(t, b.cmd.Process.Kill())
	_ = b.cmd.Wait()
}

func (b *binDaemon) api() exporter.Daemon { return exporter.URLDaemon(b.url, http.DefaultClient) }

// waitFor polls the daemon's API until the termination of uid meets cond.
func (b *binDaemon) waitFor(ctx context.Context, t *testing.T, ns, uid string, cond func(correlate.Termination) bool) correlate.Termination {
	t.Helper()
	var last correlate.Termination
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := b.api().Terminations(ctx, url.Values{"namespace": {ns}})
		if err != nil {
			return false, nil
		}
		for _, v := range list.Terminations {
			if v.PodUID == uid {
				last = v.Termination
				return cond(last), nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("termination of %s on %s: %v (last %+v)", uid, b.url, err, last)
	}
	return last
}
