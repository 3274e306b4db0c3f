package node

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// The kubelet's and containerd's termination rules, as pure functions.

// DefaultGracePeriod is the API default of terminationGracePeriodSeconds.
const DefaultGracePeriod = 30

// MinStopWindow is the kubelet's minimumGracePeriodInSeconds: the stop
// signal always gets at least this long before SIGKILL, even when preStop
// used up the grace period.
const MinStopWindow = 2

// GracePeriod is the grace the kubelet's pod worker uses
// (calculateEffectiveGracePeriod in v1.37): deletionGracePeriodSeconds when
// the API server set one (even 0: a force delete), else
// spec.terminationGracePeriodSeconds, else 30; never under 1.
func GracePeriod(pod *corev1.Pod) int64 {
	g := int64(DefaultGracePeriod)
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		g = *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	return max(g, 1)
}

// PreStopElapsed is the preStop duration the kubelet subtracts from the
// grace: truncated to whole seconds (int64(d.Seconds())).
func PreStopElapsed(d time.Duration) int64 { return int64(d.Seconds()) }

// StopTimeout is the timeout passed to CRI StopContainer: the grace left
// after preStop, floored at MinStopWindow.
func StopTimeout(grace, preStopElapsed int64) int64 {
	return max(grace-preStopElapsed, MinStopWindow)
}

// StopSignal is the signal containerd sends first, by its precedence: the
// container's lifecycle.stopSignal when set, else the image's STOPSIGNAL,
// else SIGTERM.
func StopSignal(c *corev1.Container, img Image) (syscall.Signal, error) {
	switch {
	case c.Lifecycle != nil && c.Lifecycle.StopSignal != nil:
		return ParseSignal(string(*c.Lifecycle.StopSignal))
	case img.StopSignal != "":
		return ParseSignal(img.StopSignal)
	}
	return syscall.SIGTERM, nil
}

// ParseSignal parses "SIGTERM", "TERM", "15", "SIGRTMIN+3", "SIGRTMAX-2"
// the way containerd (moby/sys/signal) does; SIGRTMIN is 34 with glibc.
func ParseSignal(s string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n <= 64 {
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	const rtmin, rtmax = 34, 64
	for base, v := range map[string]int{"SIGRTMIN+": rtmin, "SIGRTMAX-": rtmax} {
		if rest, ok := strings.CutPrefix(name, base); ok {
			n, err := strconv.Atoi(rest)
			if err == nil && base == "SIGRTMAX-" {
				n = -n
			}
			if err == nil && v+n >= rtmin && v+n <= rtmax {
				return syscall.Signal(v + n), nil
			}
		}
	}
	switch name {
	case "SIGRTMIN":
		return rtmin, nil
	case "SIGRTMAX":
		return rtmax, nil
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("unknown stop signal %q", s)
}

// ExitCode is the container exit code containerd reports: the exit status,
// or 128+signal when the init process died of a signal.
func ExitCode(ws syscall.WaitStatus) int32 {
	if ws.Signaled() {
		return 128 + int32(ws.Signal())
	}
	return int32(ws.ExitStatus())
}

// ReasonOOMKilled is the terminated state's reason of a container the
// kernel's OOM killer killed.
const ReasonOOMKilled = "OOMKilled"

// ExitReason is the terminated state's reason for an exit code.
func ExitReason(code int32) string {
	if code == 0 {
		return "Completed"
	}
	return "Error"
}
