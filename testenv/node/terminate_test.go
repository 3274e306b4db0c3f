package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/node"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// deleted is what a test sees of one pod deletion.
type deleted struct {
	info      node.PodInfo
	initPIDNS string // readlink of the init's /proc/<pid>/ns/pid while it ran
	term      node.Termination
	last      *corev1.Pod // last version before the DELETED event
	log       []logLine   // the container's stderr
}

type logLine struct {
	Time  time.Time `json:"time"`
	PID   int       `json:"pid"`
	Event string    `json:"event"`
}

// runAndDelete starts the pod, waits for Ready, deletes it (grace from the
// spec) and collects what happened.
func (l *lab) runAndDelete(t *testing.T, ctx context.Context, pod *corev1.Pod) deleted {
	t.Helper()
	created, h := l.create(t, ctx, pod)
	h.until(t, ctx, "Ready", podReady)
	info, _ := l.agent.Pod(created.UID)
	pidns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", info.Containers[0].InitPID))
	if err := l.client.CoreV1().Pods(l.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	d := deleted{info: info, initPIDNS: pidns, last: h.lastBeforeDelete(t, ctx)}
	terms := l.agent.Terminations(created.UID)
	if len(terms) != 1 {
		t.Fatalf("%d terminations recorded, want 1", len(terms))
	}
	d.term = terms[0]
	d.log = readLog(t, info.Containers[0].LogPath)
	mustNotExist(t, info.Netns, info.Containers[0].Cgroup, info.PodCgroup)
	return d
}

func readLog(t *testing.T, path string) []logLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []logLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Event != "" {
			out = append(out, l)
		}
	}
	return out
}

func (d deleted) logEvent(name string) (logLine, bool) {
	for _, l := range d.log {
		if l.Event == name {
			return l, true
		}
	}
	return logLine{}, false
}

// summary is the termination and final status as one comparable line.
func (d deleted) summary() string {
	cs := d.last.Status.ContainerStatuses[0]
	state := "not terminated"
	if tt := cs.State.Terminated; tt != nil {
		state = fmt.Sprintf("terminated exit=%d reason=%s id=%s", tt.ExitCode, tt.Reason, tt.ContainerID)
	}
	return fmt.Sprintf("grace=%d prestop=%s elapsed=%d stop_timeout=%d signal=%s sigkill=%t exit=%d | phase=%s ready=%t %s",
		d.term.Grace, d.term.PreStop, d.term.PreStopElapsed, d.term.StopTimeout, d.term.StopSignal,
		!d.term.SIGKILLAt.IsZero(), d.term.ExitCode, d.last.Status.Phase, podReady(d.last), state)
}

// kubeletEvents waits (at most 5 s) until the pod has its Killing event and
// returns the Killing and FailedPreStopHook events as lines.
func (l *lab) kubeletEvents(t *testing.T, ctx context.Context, uid string) []string {
	t.Helper()
	for i := 0; i < 50; i++ {
		var lines []string
		for _, e := range l.events(t, ctx, uid) {
			if e.Reason == node.ReasonKilling || e.Reason == node.ReasonFailedPreStopHook {
				lines = append(lines, eventLine(e))
			}
		}
		if len(lines) > 0 && strings.Contains(strings.Join(lines, "\n"), node.ReasonKilling) {
			return lines
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no Killing event within 5 s")
	return nil
}

// TestDeleteRunsKillingPreStopThenStopSignal: Killing, a 2 s preStop sleep,
// SIGTERM at PID 1 with the 8 s left, a clean exit 0, cleanup, deletion.
func TestDeleteRunsKillingPreStopThenStopSignal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-delete")
	pod := l.serverPod("web", "naive", 10, &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 2}})
	d := l.runAndDelete(t, ctx, pod)

	want := "grace=10 prestop=sleep elapsed=2 stop_timeout=8 signal=terminated sigkill=false exit=0 | " +
		"phase=Succeeded ready=false terminated exit=0 reason=Completed id=containerd://" + d.info.Containers[0].ID
	if got := d.summary(); got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	tm := d.term
	if !(tm.Killing.Before(tm.PreStopStart) && tm.PreStopEnd.Before(tm.StopSignalAt) && tm.StopSignalAt.Before(tm.ExitAt)) {
		t.Fatalf("order: killing %s prestop %s-%s stop signal %s exit %s", tm.Killing, tm.PreStopStart, tm.PreStopEnd, tm.StopSignalAt, tm.ExitAt)
	}
	if s := tm.StopSignalAt.Sub(tm.Killing); s < 2*time.Second || s >= 3*time.Second {
		t.Fatalf("stop signal %s after Killing, want the 2 s preStop (truncated to 2)", s)
	}
	sig, ok := d.logEvent("signal")
	if !ok || sig.PID != 1 || sig.Time.Before(tm.StopSignalAt) || sig.Time.After(tm.ExitAt) {
		t.Fatalf("PID 1 saw the signal at %+v (found %t), agent sent it at %s", sig, ok, tm.StopSignalAt)
	}
	evs := l.kubeletEvents(t, ctx, string(d.info.UID))
	if want := "Normal Killing \"Stopping container srv\" spec.containers{srv} kubelet/" + l.agent.Name(); strings.Join(evs, "\n") != want {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(evs, "\n"), want)
	}
}

// TestIgnoreTermIsKilledWhenGraceRunsOut: a shell PID 1 drops SIGTERM; the
// SIGKILL comes after the full 3 s and the exit code is 137.
func TestIgnoreTermIsKilledWhenGraceRunsOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-ignore")
	d := l.runAndDelete(t, ctx, l.serverPod("web", "ignore-term", 3, nil))
	want := "grace=3 prestop= elapsed=0 stop_timeout=3 signal=terminated sigkill=true exit=137 | " +
		"phase=Failed ready=false terminated exit=137 reason=Error id=containerd://" + d.info.Containers[0].ID
	if got := d.summary(); got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	if s := d.term.SIGKILLAt.Sub(d.term.StopSignalAt); s < 3*time.Second || s >= 3500*time.Millisecond {
		t.Fatalf("SIGKILL %s after the stop signal, want the 3 s grace", s)
	}
	if l, ok := d.logEvent("signal"); ok {
		t.Fatalf("the server under the shell saw a signal: %+v", l)
	}
}

// TestPreStopUsingTheGraceGetsTheTwoSecondFloor: grace 3, preStop 2 s: 1 s
// left becomes 2 s, so SIGKILL lands 4 s after Killing, past the grace.
func TestPreStopUsingTheGraceGetsTheTwoSecondFloor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-floor")
	pod := l.serverPod("web", "ignore-term", 3, &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 2}})
	d := l.runAndDelete(t, ctx, pod)
	want := "grace=3 prestop=sleep elapsed=2 stop_timeout=2 signal=terminated sigkill=true exit=137 | " +
		"phase=Failed ready=false terminated exit=137 reason=Error id=containerd://" + d.info.Containers[0].ID
	if got := d.summary(); got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	if s := d.term.SIGKILLAt.Sub(d.term.Killing); s < 4*time.Second || s >= 5*time.Second {
		t.Fatalf("SIGKILL %s after Killing, want 2 s preStop + 2 s floor", s)
	}
}

// TestPreStopExecOfMissingBinaryFails: FailedPreStopHook after Killing, the
// whole grace left for the stop signal; protocol mode drains and exits 0.
func TestPreStopExecOfMissingBinaryFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-hookfail")
	pod := l.serverPod("web", "protocol", 5, &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/nonexistent/prestop"}}})
	d := l.runAndDelete(t, ctx, pod)
	want := "grace=5 prestop=exec elapsed=0 stop_timeout=5 signal=terminated sigkill=false exit=0 | " +
		"phase=Succeeded ready=false terminated exit=0 reason=Completed id=containerd://" + d.info.Containers[0].ID
	if got := d.summary(); got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(d.term.PreStopErr, "No such file or directory") {
		t.Fatalf("preStop error %q", d.term.PreStopErr)
	}
	evs := strings.Join(l.kubeletEvents(t, ctx, string(d.info.UID)), "\n")
	want = "Normal Killing \"Stopping container srv\" spec.containers{srv} kubelet/" + l.agent.Name() + "\n" +
		"Warning FailedPreStopHook \"PreStopHook failed\" spec.containers{srv} kubelet/" + l.agent.Name()
	if evs != want {
		t.Fatalf("events:\n%s\nwant:\n%s", evs, want)
	}
	if _, ok := d.logEvent("not_ready"); !ok || d.term.StopSignal != syscall.SIGTERM {
		t.Fatalf("protocol server did not drain: %+v", d.log)
	}
}
