package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/node"
	"github.com/drainwatch/drainwatch/testenv/node/kubeletprobe"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// pyLine is one JSON line of testdata/probeserver.py.
type pyLine struct {
	Event     string         `json:"event"`
	TimeNS    int64          `json:"time_ns"`
	AfterTerm map[string]int `json:"after_term"`
}

// pyServerPod runs testdata/probeserver.py with args; probes are set by
// the caller.
func (l *lab) pyServerPod(t *testing.T, name string, grace int64, args ...string) *corev1.Pod {
	script, err := filepath.Abs("testdata/probeserver.py")
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: l.ns},
		Spec: corev1.PodSpec{NodeName: l.agent.Name(), TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "srv", Image: "local:/usr/bin/python3",
				Args: append([]string{"-u", script}, args...)}}},
	}
}

func tcpProbe(port int32) *corev1.Probe {
	return &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 1000,
		ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}}}
}

func httpProbe(port int32, path string) *corev1.Probe {
	return &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 1000,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port)}}}
}

func readPyLog(t *testing.T, path string) map[string]pyLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]pyLine{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l pyLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Event != "" {
			out[l.Event] = l
		}
	}
	return out
}

// deleteAndWait deletes the pods and waits until each is gone.
func (l *lab) deleteAndWait(t *testing.T, ctx context.Context, pods map[string]*history) {
	t.Helper()
	for name := range pods {
		if err := l.client.CoreV1().Pods(l.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range pods {
		h.lastBeforeDelete(t, ctx)
	}
}

// attemptsOf is the prober's log for one pod's probes of one kind.
func attemptsOf(t *testing.T, a *node.Agent, pod, probe string) []node.ProbeAttempt {
	t.Helper()
	all, err := a.ProbeAttempts()
	if err != nil {
		t.Fatal(err)
	}
	var out []node.ProbeAttempt
	for _, at := range all {
		if at.Pod == pod && at.Probe == probe {
			out = append(out, at)
		}
	}
	return out
}

// TestProbesComeFromTheKubeletProcess: readiness probes (tcpSocket on one
// pod, httpGet on another) connect from a process whose comm is "kubelet"
// in the node's namespace. Each server closes its listener at SIGTERM and
// lives 3.5 s more. By the prober's attempt log and the server's own log,
// every attempt after the close was refused, every one while it listened
// accepted (and one made before the server listened refused), and the
// prober's counts for the pod's ip:port are exactly those.
func TestProbesComeFromTheKubeletProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-kubelet")
	checkProberProcess(t, l.agent)

	tcp := l.pyServerPod(t, "tcp", 10, "close", "3.5")
	tcp.Spec.Containers[0].ReadinessProbe = tcpProbe(8080)
	http := l.pyServerPod(t, "http", 10, "close", "3.5")
	http.Spec.Containers[0].ReadinessProbe = httpProbe(8080, "/ready")
	pods := map[string]*history{}
	infos := map[string]node.PodInfo{}
	for _, p := range []*corev1.Pod{tcp, http} {
		created, h := l.create(t, ctx, p)
		h.until(t, ctx, p.Name+" Ready", podReady)
		pods[p.Name] = h
		infos[p.Name], _ = l.agent.Pod(created.UID)
	}
	time.Sleep(1500 * time.Millisecond) // accepted attempts on record before the close
	l.deleteAndWait(t, ctx, pods)
	counts, err := l.agent.ProbeCounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tcp", "http"} {
		info := infos[name]
		log := readPyLog(t, info.Containers[0].LogPath)
		listening, closed := log["listening"].TimeNS, log["listener_closed"].TimeNS
		if listening == 0 || closed == 0 {
			t.Fatalf("%s: server log has no listening or listener_closed: %+v", name, log)
		}
		// Attempts before the server listened (the first probe runs at
		// once) and after it closed are refused, the ones between accepted.
		var early, open, after int
		for _, at := range attemptsOf(t, l.agent, l.ns+"/"+name, "Readiness") {
			want := kubeletprobe.Refused
			switch start := at.Start.UnixNano(); {
			case start > closed:
				after++
			case start > listening:
				open++
				want = kubeletprobe.Accepted
			default:
				early++
			}
			if at.Outcome != want {
				t.Errorf("%s: attempt at %s was %s, want %s (listening %d, closed %d)", name, at.Start, at.Outcome, want, listening, closed)
			}
		}
		target := info.IP + ":8080"
		want := node.ProbeCount{Attempts: early + open + after, Accepted: open, Refused: early + after}
		t.Logf("%s %s: prober %+v; log: %d attempts before listening, %d while open, %d after the close",
			name, target, counts[target], early, open, after)
		if counts[target] != want {
			t.Errorf("%s %s: prober counted %+v, its attempt log says %+v", name, target, counts[target], want)
		}
		if after < 3 {
			t.Errorf("%s: %d readiness attempts in the 3.5 s after the close, want the 3 or 4 a 1 s period makes", name, after)
		}
	}
}

// checkProberProcess: the prober's comm is "kubelet" and it sits in the
// node's network namespace.
func checkProberProcess(t *testing.T, a *node.Agent) {
	t.Helper()
	pid := a.ProberPID()
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		t.Fatal(err)
	}
	netns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	got := fmt.Sprintf("comm=%s netns=%s", strings.TrimSpace(string(comm)), netns)
	if want := fmt.Sprintf("comm=kubelet netns=net:[%d]", a.NodeNS().Inode()); got != want {
		t.Fatalf("prober process %d: %s, want %s", pid, got, want)
	}
}

// TestLivenessAndStartupStopAtDeletionReadinessRunsToExit: like the
// kubelet's probe workers, liveness and startup probes make no attempt
// after the deletion (Killing), readiness probes go on after the stop
// signal until the container exits. The server exits once it has accepted
// 3 connections on the readiness port after SIGTERM; it counts what the
// liveness port accepted meanwhile (it still listens).
func TestLivenessAndStartupStopAtDeletionReadinessRunsToExit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-probelife")
	live := l.pyServerPod(t, "live", 30, "count", "3")
	live.Spec.Containers[0].ReadinessProbe = tcpProbe(8080)
	live.Spec.Containers[0].LivenessProbe = tcpProbe(8081)
	// A startup probe that never passes (nothing listens on 8082) keeps the
	// container unstarted; it would be retried 1000 times.
	start := l.pyServerPod(t, "start", 30, "close", "0")
	start.Spec.Containers[0].StartupProbe = tcpProbe(8082)
	pods := map[string]*history{}
	created := map[string]*corev1.Pod{}
	for _, p := range []*corev1.Pod{live, start} {
		created[p.Name], pods[p.Name] = l.create(t, ctx, p)
	}
	pods["live"].until(t, ctx, "live Ready", podReady)
	time.Sleep(2 * time.Second) // liveness and startup attempts on record
	l.deleteAndWait(t, ctx, pods)

	term := l.agent.Terminations(created["live"].UID)[0]
	lines := []string{
		countAfter(attemptsOf(t, l.agent, l.ns+"/live", "Liveness"), "liveness after Killing", term.Killing),
		countAfter(attemptsOf(t, l.agent, l.ns+"/start", "Startup"), "startup after Killing", l.agent.Terminations(created["start"].UID)[0].Killing),
		countAfter(attemptsOf(t, l.agent, l.ns+"/live", "Readiness"), "readiness after the stop signal", term.StopSignalAt),
		countAfter(attemptsOf(t, l.agent, l.ns+"/live", "Readiness"), "readiness after exit", term.ExitAt),
	}
	info, _ := l.agent.Pod(created["live"].UID)
	exit := readPyLog(t, info.Containers[0].LogPath)["exit"]
	lines = append(lines, fmt.Sprintf("server accepted after SIGTERM: 8080=%d 8081=%d", exit.AfterTerm["8080"], exit.AfterTerm["8081"]))
	want := []string{"liveness after Killing: 0 (0 accepted)", "startup after Killing: 0 (0 accepted)",
		"readiness after the stop signal: 3 (3 accepted)", "readiness after exit: 0 (0 accepted)",
		"server accepted after SIGTERM: 8080=3 8081=0"}
	if got := strings.Join(lines, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("\n got:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	for _, kind := range []string{"Liveness", "Startup"} {
		pod := map[string]string{"Liveness": "live", "Startup": "start"}[kind]
		t.Logf("%s attempts before the deletion: %d", kind, len(attemptsOf(t, l.agent, l.ns+"/"+pod, kind)))
	}
}

// countAfter counts the attempts that started after t, and the accepted
// ones among them.
func countAfter(attempts []node.ProbeAttempt, what string, t time.Time) string {
	n, accepted := 0, 0
	for _, at := range attempts {
		if at.Start.After(t) {
			n++
			if at.Outcome == kubeletprobe.Accepted {
				accepted++
			}
		}
	}
	return fmt.Sprintf("%s: %d (%d accepted)", what, n, accepted)
}
