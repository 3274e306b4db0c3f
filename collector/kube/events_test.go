package kube

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drainwatch/drainwatch/collector"
)

func TestConvertKubeletEvent(t *testing.T) {
	micro := time.Date(2026, 11, 29, 12, 0, 1, 123456000, time.UTC)
	sec := time.Date(2026, 11, 29, 12, 0, 2, 0, time.UTC)
	pod := corev1.ObjectReference{Kind: "Pod", UID: testUID}
	kubelet := corev1.EventSource{Component: "kubelet", Host: "node-a"}
	tests := []struct {
		name string
		ev   corev1.Event
		want collector.KubeletEvent
		ok   bool
	}{
		{"killing with eventTime", corev1.Event{InvolvedObject: pod, Reason: "Killing", Message: "Stopping container app", Source: kubelet,
			EventTime: metav1.NewMicroTime(micro), FirstTimestamp: metav1.NewTime(sec)},
			collector.KubeletEvent{PodUID: testUID, Reason: "Killing", Message: "Stopping container app", Time: micro}, true},
		{"prestop failed, legacy timestamps", corev1.Event{InvolvedObject: pod, Reason: "FailedPreStopHook", Message: "PreStopHook failed",
			ReportingController: "kubelet", ReportingInstance: "node-a", FirstTimestamp: metav1.NewTime(sec), LastTimestamp: metav1.NewTime(sec.Add(time.Minute))},
			collector.KubeletEvent{PodUID: testUID, Reason: "FailedPreStopHook", Message: "PreStopHook failed", Time: sec}, true},
		{"other reason", corev1.Event{InvolvedObject: pod, Reason: "Pulled", Source: kubelet}, collector.KubeletEvent{}, false},
		{"not a pod", corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Node"}, Reason: "Killing"}, collector.KubeletEvent{}, false},
	}
	for _, tt := range tests {
		got, ok := ConvertKubeletEvent(&tt.ev, "node-a")
		if ok != tt.ok || got != tt.want {
			t.Errorf("%s: got %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// TestKubeletEventSource: a Killing Event counts only when the kubelet of
// this node recorded it; anyone who may create Events can write one.
func TestKubeletEventSource(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		source               corev1.EventSource
		controller, instance string
		accepted             bool
	}{
		{"legacy recorder", corev1.EventSource{Component: "kubelet", Host: "node-a"}, "", "", true},
		{"both set", corev1.EventSource{Component: "kubelet", Host: "node-a"}, "kubelet", "node-a", true},
		{"reporting only", corev1.EventSource{}, "kubelet", "node-a", true},
		{"no source", corev1.EventSource{}, "", "", false},
		{"another node's kubelet", corev1.EventSource{Component: "kubelet", Host: "node-b"}, "", "", false},
		{"another component", corev1.EventSource{Component: "attacker", Host: "node-a"}, "", "", false},
		{"kubelet without host", corev1.EventSource{Component: "kubelet"}, "", "", false},
		{"source and reporting disagree", corev1.EventSource{Component: "kubelet", Host: "node-a"}, "kubelet", "node-b", false},
		{"reporting another controller", corev1.EventSource{Component: "kubelet", Host: "node-a"}, "my-operator", "node-a", false},
	} {
		ev := corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Pod", UID: testUID}, Reason: ReasonKilling,
			Source: tc.source, ReportingController: tc.controller, ReportingInstance: tc.instance}
		if _, ok := ConvertKubeletEvent(&ev, "node-a"); ok != tc.accepted {
			t.Errorf("%s: accepted %v, want %v", tc.name, ok, tc.accepted)
		}
	}
}

func TestRefineEventTime(t *testing.T) {
	sec := time.Date(2026, 11, 29, 12, 0, 2, 0, time.UTC)
	micro := sec.Add(123456 * time.Microsecond)
	for _, tc := range []struct {
		name              string
		t, received, want time.Time
	}{
		{"whole second, received within it", sec, sec.Add(300 * time.Millisecond), sec.Add(300 * time.Millisecond)},
		{"whole second, received later (initial list)", sec, sec.Add(5 * time.Second), sec},
		{"sub-second precision kept", micro, micro.Add(time.Millisecond), micro},
		{"clock skew: received before", sec, sec.Add(-time.Millisecond), sec},
	} {
		if got := refineEventTime(tc.t, tc.received); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
