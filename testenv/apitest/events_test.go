package apitest

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

// TestEventsVisibleInKubectl reports a termination that refused 44
// connections and checks what `kubectl describe` and `kubectl get events`
// show on the pod and on its Deployment.
func TestEventsVisibleInKubectl(t *testing.T) {
	cp := cptest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := cp.Client
	ns := createNamespace(ctx, t, c)
	dep, pod := createWorkload(ctx, t, c, ns)

	r := exporter.NewEventReporter(c, zerolog.Nop(), exporter.EventOptions{Node: "node-1"})
	defer r.Shutdown()
	if n := r.Record(ctx, refusedTermination(ns, pod)); n != 2 {
		t.Fatalf("Record recorded %d events, want 2", n)
	}
	if n := r.Record(ctx, refusedTermination(ns, pod)); n != 0 {
		t.Fatalf("a replayed termination recorded %d events, want 0", n)
	}
	waitEventCount(ctx, t, c, ns, 2)

	msg := "44 connections refused (44 after the stop signal, 0 before it): the listener closed +0.125s after the deletion while routing still sent traffic until 1.000s after it. Fix: add preStop sleep ≥ 2s: routing took 1.000s"
	for _, obj := range []string{"pod/" + pod.Name, "deployment/" + dep.Name} {
		out, err := cp.Kubectl(ctx, "-n", ns, "describe", obj)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), "Warning  DrainRefusedConnections") || !strings.Contains(string(out), "drainwatch") ||
			!strings.Contains(oneLine(string(out)), "add preStop sleep ≥ 2s") {
			t.Errorf("kubectl describe %s does not show the Event:\n%s", obj, out)
		}
	}
	out, err := cp.Kubectl(ctx, "-n", ns, "get", "events", "-o",
		"custom-columns=KIND:.involvedObject.kind,REASON:.reason,SOURCE:.source.component,HOST:.source.host,COUNT:.count", "--sort-by=.involvedObject.kind")
	if err != nil {
		t.Fatal(err)
	}
	want := "KIND         REASON                    SOURCE       HOST     COUNT\n" +
		"Deployment   DrainRefusedConnections   drainwatch   node-1   1\n" +
		"Pod          DrainRefusedConnections   drainwatch   node-1   1\n"
	if string(out) != want {
		t.Errorf("kubectl get events:\n%s\nwant:\n%s", out, want)
	}
	evs, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod"})
	if err != nil || len(evs.Items) != 1 || evs.Items[0].Message != msg || evs.Items[0].InvolvedObject.UID != pod.UID {
		t.Errorf("pod event: %v %+v\nwant message %q", err, evs, msg)
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// refusedTermination is the seeds' naive server, as the correlator reports
// it, on a real pod.
func refusedTermination(ns string, pod *corev1.Pod) correlate.Termination {
	return correlate.Termination{
		PodUID: string(pod.UID), Pod: pod.Name, Node: "node-1", PodIP: netip.MustParseAddr("10.244.1.7"),
		Workload: collector.Workload{Namespace: ns, Kind: "Deployment", Name: "web", Revision: "1"},
		Counts:   correlate.Counts{RefusedAfterSigterm: 44},
		Diagnoses: []correlate.Diagnosis{{Code: correlate.DiagListenerClosedEarly,
			Message: "44 connections refused (44 after the stop signal, 0 before it): the listener closed +0.125s after the deletion while routing still sent traffic until 1.000s after it",
			Fix:     "add preStop sleep ≥ 2s: routing took 1.000s"}},
		Outcome: correlate.OutcomeRefused, Complete: true,
	}
}

func createNamespace(ctx context.Context, t *testing.T, c kubernetes.Interface) string {
	t.Helper()
	ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "events-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// createWorkload creates Deployment web (no replicas) and one pod standing
// for its terminated replica.
func createWorkload(ctx context.Context, t *testing.T, c kubernetes.Interface, ns string) (*appsv1.Deployment, *corev1.Pod) {
	t.Helper()
	labels := map[string]string{"app": "web"}
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1"}},
		AutomountServiceAccountToken: new(bool)}
	zero := int32(0)
	dep, err := c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Bound to a node already, so the scheduler adds no Event of its own.
	spec.NodeName = "node-1"
	pod, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-6d4f-a"}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return dep, pod
}

func waitEventCount(ctx context.Context, t *testing.T, c kubernetes.Interface, ns string, want int) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		evs, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "source=drainwatch"})
		return err == nil && len(evs.Items) >= want, nil
	})
	if err != nil {
		t.Fatalf("waiting for %d drainwatch events in %s: %v", want, ns, err)
	}
}
