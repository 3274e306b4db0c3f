package node

import (
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/drainwatch/drainwatch/testenv/privileged"
)

func i64(v int64) *int64 { return &v }

func TestGracePeriod(t *testing.T) {
	for _, tc := range []struct {
		name           string
		deletion, spec *int64
		want           int64
	}{
		{"default", nil, nil, 30},
		{"spec", nil, i64(45), 45},
		{"deletion overrides spec", i64(5), i64(45), 5},
		{"force delete: 1 s", i64(0), i64(45), 1},
		{"spec zero becomes 1", nil, i64(0), 1},
	} {
		pod := &corev1.Pod{}
		pod.DeletionGracePeriodSeconds = tc.deletion
		pod.Spec.TerminationGracePeriodSeconds = tc.spec
		if got := GracePeriod(pod); got != tc.want {
			t.Errorf("%s: GracePeriod = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestStopTimeoutAfterPreStop(t *testing.T) {
	for _, tc := range []struct {
		grace   int64
		preStop time.Duration
		elapsed int64
		stop    int64
	}{
		{30, 0, 0, 30},
		{30, 1999 * time.Millisecond, 1, 29}, // truncated, not rounded
		{30, 5 * time.Second, 5, 25},
		{10, 9500 * time.Millisecond, 9, 2}, // 1 s left: the 2 s floor
		{10, 10 * time.Second, 10, 2},       // preStop cut at the grace
		{3, 2900 * time.Millisecond, 2, 2},  // exactly 1 left, floor again
		{5, 2100 * time.Millisecond, 2, 3},  // 3 left, no floor
		{1, 0, 0, 2},                        // grace under the floor
	} {
		elapsed := PreStopElapsed(tc.preStop)
		if elapsed != tc.elapsed {
			t.Errorf("PreStopElapsed(%s) = %d, want %d", tc.preStop, elapsed, tc.elapsed)
		}
		if got := StopTimeout(tc.grace, elapsed); got != tc.stop {
			t.Errorf("StopTimeout(%d, %d) = %d, want %d", tc.grace, elapsed, got, tc.stop)
		}
	}
}

func TestStopSignalAndParse(t *testing.T) {
	c := &corev1.Container{}
	if sig, _ := StopSignal(c, Image{}); sig != syscall.SIGTERM {
		t.Errorf("no lifecycle, no image config: %v, want SIGTERM", sig)
	}
	nginx := BuiltinImages()["nginx"]
	if sig, _ := StopSignal(c, nginx); sig != syscall.SIGQUIT {
		t.Errorf("nginx image: %v, want SIGQUIT (its STOPSIGNAL)", sig)
	}
	if sig, _ := StopSignal(c, BuiltinImages()["haproxy"]); sig != syscall.SIGUSR1 {
		t.Errorf("haproxy image: %v, want SIGUSR1 (its STOPSIGNAL)", sig)
	}
	usr1 := corev1.SIGUSR1
	c.Lifecycle = &corev1.Lifecycle{StopSignal: &usr1}
	if sig, _ := StopSignal(c, Image{}); sig != syscall.SIGUSR1 {
		t.Errorf("stopSignal SIGUSR1: %v", sig)
	}
	if sig, _ := StopSignal(c, nginx); sig != syscall.SIGUSR1 {
		t.Errorf("stopSignal SIGUSR1 over the nginx image: %v, want the pod's", sig)
	}
	for in, want := range map[string]syscall.Signal{
		"SIGQUIT": 3, "TERM": 15, "9": 9, "SIGRTMIN": 34, "SIGRTMIN+1": 35, "SIGRTMAX-1": 63, "SIGRTMAX": 64,
	} {
		if got, err := ParseSignal(in); got != want || err != nil {
			t.Errorf("ParseSignal(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := ParseSignal("SIGNOPE"); err == nil {
		t.Error("ParseSignal(SIGNOPE) succeeded")
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		ws     syscall.WaitStatus
		code   int32
		reason string
	}{
		{0, 0, "Completed"},
		{1 << 8, 1, "Error"},
		{syscall.WaitStatus(syscall.SIGKILL), 137, "Error"},
		{syscall.WaitStatus(syscall.SIGTERM), 143, "Error"},
	} {
		if got := ExitCode(tc.ws); got != tc.code || ExitReason(got) != tc.reason {
			t.Errorf("ExitCode(%#x) = %d %s, want %d %s", uint32(tc.ws), got, ExitReason(got), tc.code, tc.reason)
		}
	}
}

func TestCgroupNames(t *testing.T) {
	uid := "1f2e3d4c-aaaa-bbbb-cccc-0123456789ab"
	id := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for qos, want := range map[corev1.PodQOSClass]string{
		corev1.PodQOSBurstable:  "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1f2e3d4c_aaaa_bbbb_cccc_0123456789ab.slice/cri-containerd-" + id + ".scope",
		corev1.PodQOSBestEffort: "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1f2e3d4c_aaaa_bbbb_cccc_0123456789ab.slice/cri-containerd-" + id + ".scope",
		corev1.PodQOSGuaranteed: "kubepods.slice/kubepods-pod1f2e3d4c_aaaa_bbbb_cccc_0123456789ab.slice/cri-containerd-" + id + ".scope",
	} {
		if got := ContainerScope(qos, types.UID(uid), id); got != want {
			t.Errorf("%s:\n got %s\nwant %s", qos, got, want)
		}
	}
}

func TestQOSClass(t *testing.T) {
	q := resource.MustParse
	mk := func(req, lim corev1.ResourceList) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}}}}
	}
	full := corev1.ResourceList{corev1.ResourceCPU: q("100m"), corev1.ResourceMemory: q("64Mi")}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want corev1.PodQOSClass
	}{
		"nothing":         {mk(nil, nil), corev1.PodQOSBestEffort},
		"limits=requests": {mk(full, full), corev1.PodQOSGuaranteed},
		"limits only":     {mk(nil, full), corev1.PodQOSGuaranteed},
		"requests only":   {mk(full, nil), corev1.PodQOSBurstable},
	} {
		if got := QOSClass(tc.pod); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
}

func TestCgroup2Mount(t *testing.T) {
	m, err := Cgroup2Mount()
	if err != nil {
		if privileged.InCI() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if m != "/sys/fs/cgroup" && m != "/sys/fs/cgroup/unified" {
		t.Errorf("Cgroup2Mount = %s", m)
	}
}
