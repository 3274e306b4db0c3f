package correlate

import (
	"fmt"
	"strings"
)

// containerStopped diagnoses a container's termination (no deletion): the
// pod stays in its Service while the container is down, so every
// connection between the stop and the restart is lost, and the fix is in
// what stopped it: an aggressive liveness probe, a memory limit, a crash.
func containerStopped(t Termination) *Diagnosis {
	switch t.Cause {
	case CauseOOMKill:
		return &Diagnosis{Code: DiagOOMKilled,
			Message: fmt.Sprintf("the kernel's OOM killer killed the container: %s, while the pod stayed in its Service", lost(t)),
			Fix:     "raise resources.limits.memory above the container's peak use, or bound its memory (caches, request bodies, GOMEMLIMIT for Go) below the limit"}
	case CauseContainerRestart:
	default:
		return nil
	}
	if probe := probeKill(t.CauseEvidence); probe != "" {
		return &Diagnosis{Code: DiagLivenessRestart,
			Message: fmt.Sprintf("the kubelet restarted the container after a failed %s probe: %s, while the pod stayed in its Service", probe, lost(t)),
			Fix: fmt.Sprintf("make the %s probe less aggressive than readiness (failureThreshold × periodSeconds above the longest stall, "+
				"an endpoint that checks only the process), so readiness takes the pod out of the Service first", probe)}
	}
	if strings.HasSuffix(t.CauseEvidence, "a crash") {
		return &Diagnosis{Code: DiagContainerCrashed,
			Message: fmt.Sprintf("the container stopped by itself (exit code %d): %s, while the pod stayed in its Service", t.ExitCode, lost(t)),
			Fix:     "read why it stopped (kubectl logs --previous); a readiness probe that fails as the server stops shortens the window"}
	}
	return nil
}

// lost says what a container's termination cost its clients.
func lost(t Termination) string {
	n := t.Counts
	return fmt.Sprintf("%d connections refused, %d requests killed in flight", n.RefusedAfterSigterm+n.RefusedBeforeSigterm,
		n.RequestsKilledBySigkill+n.RequestsKilledAtExit)
}
