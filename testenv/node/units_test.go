package node

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestIPAMRoundRobinAndExhaustion(t *testing.T) {
	a := newIPAM(3)
	first, _ := a.allocate()
	second, _ := a.allocate()
	a.release(first)
	third, _ := a.allocate() // not the released one: reuse as late as possible
	if first != 2 || second != 3 || third != 4 {
		t.Fatalf("allocated %d %d %d, want 2 3 4", first, second, third)
	}
	for i := 0; i < 251; i++ { // 253 addresses (.2-.254), 2 in use
		if _, err := a.allocate(); err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
	}
	if _, err := a.allocate(); err == nil || !strings.Contains(err.Error(), "10.244.3.0/24 exhausted") {
		t.Fatalf("allocation past .254: %v, want exhausted", err)
	}
}

func TestResolveArgv(t *testing.T) {
	images := map[string]Image{"dwserver": {Entrypoint: "/bin/true"}, "nginx": {Entrypoint: "/usr/sbin/nginx", StopSignal: "SIGQUIT"}}
	for _, tc := range []struct {
		image         string
		command, args []string
		want          string
	}{
		{"local:/bin/sh", nil, []string{"-c", "x"}, "/bin/sh [/bin/sh -c x]"},
		{"dwserver", nil, []string{"--mode=naive"}, "/bin/true [/bin/true --mode=naive]"},
		{"dwserver:latest", nil, nil, "/bin/true [/bin/true]"},
		{"local:/bin/sh", []string{"sleep"}, []string{"1"}, "/usr/bin/sleep [sleep 1]"},
		{"nginx:1.27", nil, nil, "/usr/sbin/nginx [/usr/sbin/nginx] stop=SIGQUIT"},
		{"haproxy", nil, nil, "error"},
	} {
		path, argv, img, err := resolveArgv(&corev1.Container{Image: tc.image, Command: tc.command, Args: tc.args}, images)
		got := path + " [" + strings.Join(argv, " ") + "]"
		if img.StopSignal != "" {
			got += " stop=" + img.StopSignal
		}
		if err != nil {
			got = "error"
		}
		if got != tc.want {
			t.Errorf("%s %v %v: %s, want %s", tc.image, tc.command, tc.args, got, tc.want)
		}
	}
}

func TestRestartPolicyAndBackoff(t *testing.T) {
	pod := &corev1.Pod{}
	for _, tc := range []struct {
		policy corev1.RestartPolicy
		code   int32
		want   bool
	}{
		{corev1.RestartPolicyAlways, 0, true}, {corev1.RestartPolicyOnFailure, 0, false},
		{corev1.RestartPolicyOnFailure, 137, true}, {corev1.RestartPolicyNever, 1, false},
	} {
		pod.Spec.RestartPolicy = tc.policy
		if got := restartable(pod, tc.code); got != tc.want {
			t.Errorf("%s exit %d: restart %t, want %t", tc.policy, tc.code, got, tc.want)
		}
	}
	for n, want := range map[int32]time.Duration{1: 10 * time.Second, 2: 20 * time.Second, 5: 160 * time.Second, 6: 5 * time.Minute, 30: 5 * time.Minute} {
		if got := backoff(n); got != want {
			t.Errorf("backoff(%d) = %s, want %s", n, got, want)
		}
	}
}
