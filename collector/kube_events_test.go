package collector

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestConvertKubeletEvent(t *testing.T) {
	micro := time.Date(2026, 11, 29, 12, 0, 1, 123456000, time.UTC)
	sec := time.Date(2026, 11, 29, 12, 0, 2, 0, time.UTC)
	pod := corev1.ObjectReference{Kind: "Pod", UID: testUID}
	tests := []struct {
		name string
		ev   corev1.Event
		want KubeletEvent
		ok   bool
	}{
		{"killing with eventTime", corev1.Event{InvolvedObject: pod, Reason: "Killing", Message: "Stopping container app",
			EventTime: metav1.NewMicroTime(micro), FirstTimestamp: metav1.NewTime(sec)},
			KubeletEvent{PodUID: testUID, Reason: "Killing", Message: "Stopping container app", Time: micro}, true},
		{"prestop failed, legacy timestamps", corev1.Event{InvolvedObject: pod, Reason: "FailedPreStopHook", Message: "PreStopHook failed",
			FirstTimestamp: metav1.NewTime(sec), LastTimestamp: metav1.NewTime(sec.Add(time.Minute))},
			KubeletEvent{PodUID: testUID, Reason: "FailedPreStopHook", Message: "PreStopHook failed", Time: sec}, true},
		{"other reason", corev1.Event{InvolvedObject: pod, Reason: "Pulled"}, KubeletEvent{}, false},
		{"not a pod", corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Node"}, Reason: "Killing"}, KubeletEvent{}, false},
	}
	for _, tt := range tests {
		got, ok := ConvertKubeletEvent(&tt.ev)
		if ok != tt.ok || got != tt.want {
			t.Errorf("%s: got %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
