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
	tests := []struct {
		name string
		ev   corev1.Event
		want collector.KubeletEvent
		ok   bool
	}{
		{"killing with eventTime", corev1.Event{InvolvedObject: pod, Reason: "Killing", Message: "Stopping container app",
			EventTime: metav1.NewMicroTime(micro), FirstTimestamp: metav1.NewTime(sec)},
			collector.KubeletEvent{PodUID: testUID, Reason: "Killing", Message: "Stopping container app", Time: micro}, true},
		{"prestop failed, legacy timestamps", corev1.Event{InvolvedObject: pod, Reason: "FailedPreStopHook", Message: "PreStopHook failed",
			FirstTimestamp: metav1.NewTime(sec), LastTimestamp: metav1.NewTime(sec.Add(time.Minute))},
			collector.KubeletEvent{PodUID: testUID, Reason: "FailedPreStopHook", Message: "PreStopHook failed", Time: sec}, true},
		{"other reason", corev1.Event{InvolvedObject: pod, Reason: "Pulled"}, collector.KubeletEvent{}, false},
		{"not a pod", corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Node"}, Reason: "Killing"}, collector.KubeletEvent{}, false},
	}
	for _, tt := range tests {
		got, ok := ConvertKubeletEvent(&tt.ev)
		if ok != tt.ok || got != tt.want {
			t.Errorf("%s: got %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.ok)
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
