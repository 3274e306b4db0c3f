package exporter

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/rs/zerolog"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/drainwatch/drainwatch/correlate"
)

// waitEvents polls until namespace ns holds want Events (the broadcaster
// sends asynchronously) and returns them sorted by object kind and reason.
func waitEvents(t *testing.T, c kubernetes.Interface, ns string, want int) []corev1.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		list, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(list.Items) >= want {
			evs := list.Items
			sort.Slice(evs, func(i, j int) bool {
				a, b := evs[i], evs[j]
				return a.InvolvedObject.Kind+a.InvolvedObject.Name+a.Reason < b.InvolvedObject.Kind+b.InvolvedObject.Name+b.Reason
			})
			return evs
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %d events in %s: %v (have %v)", want, ns, ctx.Err(), list)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func TestEventsForLostTraffic(t *testing.T) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "dep-uid"}}
	client := fake.NewClientset(dep)
	r := NewEventReporter(client, zerolog.Nop(), EventOptions{Node: "node-1"})
	defer r.Shutdown()
	ctx := context.Background()
	got := []int{
		r.Record(ctx, naiveTermination()),
		r.Record(ctx, killedTermination()),
		r.Record(ctx, naiveTermination()), // replay: reported once
		r.Record(ctx, barePod()),          // clean: no Event
	}
	if want := []int{2, 2, 0, 0}; !slices.Equal(got, want) {
		t.Fatalf("Record returned %v, want %v", got, want)
	}
	evs := waitEvents(t, client, "shop", 4)
	want := []struct{ kind, name, uid, reason, msg string }{
		{"Deployment", "web", "dep-uid", "DrainKilledRequests", "pod web-6d4f-b (revision 3): 1 request in flight killed by SIGKILL after the 30 s grace period. Fix: raise terminationGracePeriodSeconds above preStop + drain + margin (≥ 35 s)"},
		{"Deployment", "web", "dep-uid", "DrainNoDelay", "pod web-6d4f-a (revision 3): rollout (Deployment web moved from revision 3 to 4): 44 connections refused after SIGTERM: the listener closed 0.125 s after the stop signal, routing took 1.000 s. Fix: set preStop sleep ≥ 2 s: routing took 1.0 s"},
		{"Pod", "web-6d4f-a", "uid-a", "DrainNoDelay", "rollout (Deployment web moved from revision 3 to 4): 44 connections refused after SIGTERM: the listener closed 0.125 s after the stop signal, routing took 1.000 s. Fix: set preStop sleep ≥ 2 s: routing took 1.0 s"},
		{"Pod", "web-6d4f-b", "uid-b", "DrainKilledRequests", "1 request in flight killed by SIGKILL after the 30 s grace period. Fix: raise terminationGracePeriodSeconds above preStop + drain + margin (≥ 35 s)"},
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(evs), len(want), evs)
	}
	for i, w := range want {
		e := evs[i]
		o := e.InvolvedObject
		if o.Kind != w.kind || o.Name != w.name || string(o.UID) != w.uid || e.Reason != w.reason || e.Message != w.msg ||
			e.Type != corev1.EventTypeWarning || e.Source.Component != "drainwatch" || e.Source.Host != "node-1" || e.Count != 1 {
			t.Errorf("event %d = %s %s/%s uid %s %s %q (type %s, source %+v, count %d)\nwant %+v",
				i, o.Kind, o.Namespace, o.Name, o.UID, e.Reason, e.Message, e.Type, e.Source, e.Count, w)
		}
	}
}

// TestEventsForStartups: a new pod's startup with a diagnosis gets a
// Warning Event on the pod and its workload, once, apart from the same
// pod's termination; a startup without one, none.
func TestEventsForStartups(t *testing.T) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "dep-uid"}}
	client := fake.NewClientset(dep)
	r := NewEventReporter(client, zerolog.Nop(), EventOptions{Node: "node-1"})
	defer r.Shutdown()
	ctx := context.Background()
	s := correlate.Startup{PodUID: "uid-a", Pod: "web-6d4f-a", Namespace: "shop", Workload: web3, Complete: true,
		Counts: correlate.StartupCounts{RefusedAfterReady: 3},
		Diagnoses: []correlate.Diagnosis{{Code: correlate.DiagReadyBeforeListening,
			Message: "3 connection attempts refused after the pod was Ready: port 8080 listened 2s after Ready",
			Fix:     "point the readiness probe at the port that serves the traffic"}}}
	quiet := correlate.Startup{PodUID: "uid-b", Pod: "web-6d4f-b", Namespace: "shop", Workload: web3, Complete: true}
	got := []int{r.RecordStartup(ctx, s), r.RecordStartup(ctx, s), r.RecordStartup(ctx, quiet), r.Record(ctx, naiveTermination())}
	if want := []int{2, 0, 0, 2}; !slices.Equal(got, want) {
		t.Fatalf("RecordStartup, Record returned %v, want %v", got, want)
	}
	evs := waitEvents(t, client, "shop", 4)
	want := []struct{ kind, name, reason, msg string }{
		{"Deployment", "web", "DrainNoDelay", ""},
		{"Deployment", "web", "StartupReadyBeforeListening", "pod web-6d4f-a (revision 3): startup: 3 connection attempts refused after the pod was Ready: port 8080 listened 2s after Ready. Fix: point the readiness probe at the port that serves the traffic"},
		{"Pod", "web-6d4f-a", "DrainNoDelay", ""},
		{"Pod", "web-6d4f-a", "StartupReadyBeforeListening", "startup: 3 connection attempts refused after the pod was Ready: port 8080 listened 2s after Ready. Fix: point the readiness probe at the port that serves the traffic"},
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(evs), len(want), evs)
	}
	for i, w := range want {
		e, o := evs[i], evs[i].InvolvedObject
		if o.Kind != w.kind || o.Name != w.name || e.Reason != w.reason || (w.msg != "" && e.Message != w.msg) || e.Type != corev1.EventTypeWarning {
			t.Errorf("event %d = %s %s %s %q, want %+v", i, o.Kind, o.Name, e.Reason, e.Message, w)
		}
	}
}

func TestEventReasons(t *testing.T) {
	for code, want := range map[string]string{
		"listener_closed_before_routing_converged": "DrainRefusedConnections",
		"requests_killed":                          "DrainKilledRequests", "prestop_hook_failed": "DrainPrestopFailed",
		"clean": "", "something_new": "DrainProblem",
		"connections_reset_at_shutdown": "DrainShutdownResets", "streams_killed": "DrainStreamsKilled",
		"stop_signal_mismatch": "DrainStopSignalMismatch", "connections_reset_at_exit": "DrainResetAtExit",
		"refused_inside_pod": "DrainRefusedInsidePod",
	} {
		if got := EventReason(code); got != want {
			t.Errorf("EventReason(%s) = %q, want %q", code, got, want)
		}
	}
}

// TestEventsRateLimitedPerObject: with a burst of 3, five terminations of
// one Deployment give five pod Events but only three on the Deployment.
func TestEventsRateLimitedPerObject(t *testing.T) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "dep-uid"}}
	client := fake.NewClientset(dep)
	r := NewEventReporter(client, zerolog.Nop(), EventOptions{Node: "node-1",
		Correlator: record.CorrelatorOptions{BurstSize: 3, QPS: 1.0 / 3600}})
	defer r.Shutdown()
	for i := range 5 {
		term := naiveTermination()
		term.PodUID, term.Pod = fmt.Sprintf("uid-%d", i), fmt.Sprintf("web-6d4f-%d", i)
		if n := r.Record(context.Background(), term); n != 2 {
			t.Fatalf("Record #%d recorded %d events, want 2", i, n)
		}
	}
	// The broadcaster handles events in order: once a sentinel recorded
	// last is stored, every earlier Event was stored or dropped.
	r.recorder.Event(&corev1.ObjectReference{Kind: "ConfigMap", Namespace: "shop", Name: "sentinel"}, corev1.EventTypeNormal, "Sentinel", "last")
	evs := waitEvents(t, client, "shop", 1)
	for !hasReason(evs, "Sentinel") {
		evs = waitEvents(t, client, "shop", len(evs)+1)
	}
	kinds := map[string]int{}
	for _, e := range evs {
		kinds[e.InvolvedObject.Kind]++
	}
	if len(evs) != 9 || kinds["Pod"] != 5 || kinds["Deployment"] != 3 {
		t.Fatalf("events by kind %v (total %d), want Pod 5, Deployment 3", kinds, len(evs))
	}
}

func hasReason(evs []corev1.Event, reason string) bool {
	for _, e := range evs {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

func TestReportQueuesWithoutBlocking(t *testing.T) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "dep-uid"}}
	client := fake.NewClientset(dep)
	r := NewEventReporter(client, zerolog.Nop(), EventOptions{Node: "node-1"})
	defer r.Shutdown()
	if !r.Report(naiveTermination()) {
		t.Fatal("Report: queue full on the first termination")
	}
	if evs := waitEvents(t, client, "shop", 2); len(evs) != 2 || evs[0].Reason != "DrainNoDelay" {
		t.Fatalf("events %+v", evs)
	}
}

// TestEventsForNewDiagnoses: shutdown resets, killed streams and a stop
// signal the API contradicts each get their reason on the pod.
func TestEventsForNewDiagnoses(t *testing.T) {
	client := fake.NewClientset()
	r := NewEventReporter(client, zerolog.Nop(), EventOptions{Node: "node-1"})
	defer r.Shutdown()
	if n := r.Record(context.Background(), probedTermination()); n != 3 {
		t.Fatalf("Record returned %d, want 3 (pod only: the Deployment does not exist)", n)
	}
	evs := waitEvents(t, client, "shop", 3)
	want := []string{
		"DrainShutdownResets: 6 connections reset when the listener closed with a full accept queue. Fix: stop accepting only after the endpoint is removed: preStop sleep ≥ 1 s",
		"DrainStopSignalMismatch: the runtime sent SIGQUIT, the API names SIGTERM",
		"DrainStreamsKilled: 1 open stream killed by SIGKILL. Fix: close long-lived streams at the stop signal",
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.Reason+": "+e.Message)
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%q\nwant:\n%q", got, want)
	}
}

// The reported keys are bounded: two generations of maxReported, a key
// remembered while it is in either, forgotten after two rotations.
func TestReportedKeysBounded(t *testing.T) {
	r := &EventReporter{reported: map[string]bool{}}
	key := func(i int) string { return fmt.Sprintf("uid-%d", i) }
	for i := range 2*maxReported + 1 {
		if !r.firstReport(key(i)) {
			t.Fatalf("key %d reported before", i)
		}
	}
	if n := len(r.reported) + len(r.reportedBefore); n > 2*maxReported {
		t.Errorf("%d keys held, want at most %d", n, 2*maxReported)
	}
	if r.firstReport(key(2*maxReported)) || r.firstReport(key(maxReported)) {
		t.Error("a key of the last two generations was reported again")
	}
	if !r.firstReport(key(0)) {
		t.Error("the oldest key is still held after two rotations")
	}
}
