package realnode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/drainwatch/drainwatch/testenv/netlab"
	"github.com/drainwatch/drainwatch/testenv/realnode"
)

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitPod polls the pod until cond holds.
func waitPod(t *testing.T, ctx context.Context, pods typedcorev1.PodInterface, name string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err == nil && cond(p) {
			return p
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pod %s: condition not met: %v (last: %+v)", name, ctx.Err(), p.Status)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitTerminated watches the deleted pod until it is gone and returns the
// last terminated state the kubelet reported for its container, and the
// container's log as last read before the kubelet removed it, and the
// stopSignal the status carried then (nil: none).
func waitTerminated(t *testing.T, ctx context.Context, pods typedcorev1.PodInterface, name, logPath string) (corev1.ContainerStateTerminated, *corev1.Signal, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var last *corev1.ContainerStateTerminated
	var stopSignal *corev1.Signal
	var logged string
	for ev := range w.ResultChan() {
		if b, err := os.ReadFile(logPath); err == nil {
			logged = string(b)
		}
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Terminated != nil {
				last, stopSignal = cs.State.Terminated, cs.StopSignal
			}
		}
		if ev.Type == watch.Deleted {
			if last == nil {
				t.Fatalf("pod %s deleted without a terminated container status", name)
			}
			return *last, stopSignal, logged
		}
	}
	t.Fatalf("pod %s: watch ended before deletion: %v", name, ctx.Err())
	return corev1.ContainerStateTerminated{}, nil, ""
}

// get fetches url from the fabric namespace (bounded: one request).
func get(t *testing.T, ctx context.Context, fabric *netlab.NS, url string) string {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: fabric.DialContext}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// containerLog is where the kubelet writes the pod's server log (podLogsDir).
func containerLog(n *realnode.Node, p *corev1.Pod) string {
	return filepath.Join(n.Dir, "pod-logs", p.Namespace+"_"+p.Name+"_"+string(p.UID), "server", "0.log")
}

// signalLogged finds the server's "stop signal received" line in its CRI
// log ("" when there is none).
func signalLogged(log string) string {
	for _, line := range strings.Split(log, "\n") {
		// CRI log line: <time> <stream> <P|F> <message>
		parts := strings.SplitN(line, " ", 4)
		if len(parts) < 4 {
			continue
		}
		var rec struct {
			Event  string `json:"event"`
			Signal string `json:"signal"`
		}
		if json.Unmarshal([]byte(parts[3]), &rec) == nil && rec.Event == "signal" {
			return rec.Signal
		}
	}
	return ""
}

// keepLogs copies the node's daemon logs out of its directory, which Close
// removes.
func keepLogs(t *testing.T, n *realnode.Node) {
	dir, err := os.MkdirTemp("", "realnode-logs-")
	if err != nil {
		t.Log(err)
		return
	}
	for _, name := range []string{"kubelet.log", "containerd.log"} {
		if b, err := os.ReadFile(filepath.Join(n.Dir, name)); err == nil {
			_ = os.WriteFile(filepath.Join(dir, name), b, 0o644)
		}
	}
	t.Logf("node logs kept in %s", dir)
}

// checkKillingEvent: the kubelet recorded one Normal Killing event "Stopping
// container server" for the pod, from kubelet/<node>. It logs every event
// reason the pod got, in order, for comparison with the stand-in's.
func checkKillingEvent(t *testing.T, ctx context.Context, c kubernetes.Interface, pod, node string) {
	t.Helper()
	evs, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", pod).String()})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	killing := 0
	for _, e := range evs.Items {
		reasons = append(reasons, fmt.Sprintf("%s(%s/%s,x%d)", e.Reason, e.Source.Component, e.Source.Host, e.Count))
		if e.Reason == "Killing" {
			killing++
			if e.Type != corev1.EventTypeNormal || e.Message != "Stopping container server" ||
				e.Source.Component != "kubelet" || e.Source.Host != node || e.InvolvedObject.FieldPath != "spec.containers{server}" {
				t.Errorf("Killing event %s %q from %s/%s on %s", e.Type, e.Message, e.Source.Component, e.Source.Host, e.InvolvedObject.FieldPath)
			}
		}
	}
	t.Logf("events of %s: %s", pod, strings.Join(reasons, " "))
	if killing != 1 {
		t.Errorf("%d Killing events, want 1", killing)
	}
}

// keepReading re-reads the log at path every 50 ms until the returned
// function is called, and returns the last content read: the kubelet
// removes a deleted pod's logs.
func keepReading(path string) func() string {
	done := make(chan struct{})
	last := make(chan string, 1)
	go func() {
		var content string
		for {
			if b, err := os.ReadFile(path); err == nil {
				content = string(b)
			}
			select {
			case <-done:
				last <- content
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() string { close(done); return <-last }
}

// signalTime is when the server logged its stop signal.
func signalTime(log string) (time.Time, bool) {
	for _, line := range strings.Split(log, "\n") {
		parts := strings.SplitN(line, " ", 4)
		if len(parts) < 4 {
			continue
		}
		var rec struct {
			Event string    `json:"event"`
			Time  time.Time `json:"time"`
		}
		if json.Unmarshal([]byte(parts[3]), &rec) == nil && rec.Event == "signal" {
			return rec.Time, true
		}
	}
	return time.Time{}, false
}
