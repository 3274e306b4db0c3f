package lab

import (
	"errors"
	"testing"
)

// The final table's row names the first cause WhyNotReady found, the
// container's state before a condition, and the error still unwraps.
func TestNotStartedError(t *testing.T) {
	base := errors.New("deployment lab-rollout/web not rolled out")
	why := "\n  pod web-1 on lab-real: phase Pending" +
		"\n    condition Ready=False ContainersNotReady: containers with unready status: [server]" +
		"\n    container server waiting: InvalidImageName: couldn't parse image name \"local:/usr/bin/python3\"" +
		"\n  event Warning Pod/web-1 InspectFailed: Failed to apply default image tag (x3, 19:40:01)"
	err := error(&notStarted{err: base, Why: why})
	want := `deployment lab-rollout/web not rolled out; container server waiting: InvalidImageName: couldn't parse image name "local:/usr/bin/python3"`
	if err.Error() != want {
		t.Errorf("error %q, want %q", err.Error(), want)
	}
	if !errors.Is(err, base) {
		t.Error("the error does not unwrap to the wait's")
	}
	if got := firstReason("\n  pod web-1 on lab-1: phase Running\n  event Warning ReplicaSet/web-x FailedCreate: quota"); got != "event Warning ReplicaSet/web-x FailedCreate: quota" {
		t.Errorf("firstReason without a container or condition: %q", got)
	}
}
