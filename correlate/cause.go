package correlate

import (
	"strconv"
	"strings"

	"github.com/drainwatch/drainwatch/collector"
)

// Causes: why a pod (or a container) stopped, the terminations_total
// `cause` label. People ask "why did this pod stop?" before "what did it
// lose?", and the fix depends on the answer (a node shutdown shorter than
// the pods' grace period is a node setting, not a pod one).
const (
	CauseRollout          = "rollout"           // the owner replaced this revision
	CauseScaleDown        = "scale_down"        // the owner removed a pod of its current revision
	CauseEviction         = "eviction"          // the Eviction API (kubectl drain, autoscalers) or a taint
	CausePreemption       = "preemption"        // the scheduler or the kubelet made room for another pod
	CauseNodePressure     = "node_pressure"     // the kubelet evicted it: memory, disk, PIDs
	CauseNodeShutdown     = "node_shutdown"     // graceful node shutdown
	CauseContainerRestart = "container_restart" // liveness/startup probe failure, crash
	CauseOOMKill          = "oom_kill"          // the kernel's OOM killer
	CauseDelete           = "delete"            // deleted without a controller asking: a user, a Job, the pod GC
	CauseUnknown          = "unknown"
)

// Causes lists every cause, the bounded set of the metric label.
func Causes() []string {
	return []string{CauseRollout, CauseScaleDown, CauseEviction, CausePreemption, CauseNodePressure,
		CauseNodeShutdown, CauseContainerRestart, CauseOOMKill, CauseDelete, CauseUnknown}
}

// The DisruptionTarget condition's reasons (k8s.io/api/core/v1), written
// by whoever decided the pod must go, before it goes.
const (
	disruptionPreemptionByScheduler = "PreemptionByScheduler"
	disruptionEvictionByAPI         = "EvictionByEvictionAPI"
	disruptionTaintManager          = "DeletionByTaintManager"
	disruptionPodGC                 = "DeletionByPodGC"
	disruptionByKubelet             = "TerminationByKubelet"
)

// setCause (re)names the cause of p's termination t from what is known of
// the pod now: evidence only accumulates as the termination goes on.
func setCause(t *termState, p *podState) {
	m := t.T.Marks
	in := causeInput{
		Stop:           p.Pod.Stop,
		Deleted:        !p.Pod.DeletionTimestamp.IsZero() || !m.DeletionSeen.IsZero() || !m.PodGone.IsZero() || !t.GoneBy.IsZero(),
		KillingMessage: p.KillingMessage,
		Workload:       t.T.Workload,
		Restarted:      !t.Restarted.IsZero(),
	}
	if t.ByExit && m.StopSignal.IsZero() {
		in.Exit = exitText(t.T.ExitCode, t.T.ExitSignal)
		in.KernelOOM = t.T.ExitSignal == sigkill && !t.OutsideKill
	}
	for _, ct := range p.Pod.Containers {
		// The restarted container's last state is the stopped one's.
		restarted := t.IDs[ct.Name] != "" && ct.ID != t.IDs[ct.Name]
		in.OOMKilled = in.OOMKilled || (ct.Terminated && ct.Reason == "OOMKilled") || (restarted && ct.LastReason == "OOMKilled")
	}
	t.T.Cause, t.T.CauseEvidence = classifyCause(in)
}

// causeInput is what the cause rules read: the pod's stop evidence from the
// API, whether it was deleted, the Killing Event's message and its owner,
// and what the kernel saw of a stop nobody announced: the init's exit
// (Exit, "" when a stop signal came first) and whether it was a SIGKILL
// from no one outside the container (KernelOOM).
type causeInput struct {
	Stop           collector.StopEvidence
	Deleted        bool
	OOMKilled      bool
	KernelOOM      bool
	Exit           string
	Restarted      bool
	KillingMessage string
	Workload       collector.Workload
}

// classifyCause names the cause and the evidence behind it. The first
// matching rule wins: what decided the stop (a DisruptionTarget condition,
// the kubelet's status) before who carried it out (a deletion).
func classifyCause(in causeInput) (cause, evidence string) {
	if in.OOMKilled && !in.Deleted {
		return CauseOOMKill, "container terminated: OOMKilled"
	}
	if c, ev := fromDisruption(in.Stop); c != "" {
		return c, ev
	}
	if c, ev := fromStatus(in.Stop); c != "" {
		return c, ev
	}
	if !in.Deleted {
		return containerCause(in)
	}
	return fromOwner(in.Workload, in.Stop.OwnerRevision)
}

// containerCause names the cause of a stop the API did not announce for the
// pod: the kubelet's probe kill, the kernel's kill, a crash, a restart.
func containerCause(in causeInput) (string, string) {
	switch {
	case probeKill(in.KillingMessage) != "":
		return CauseContainerRestart, "Killing: " + in.KillingMessage
	case in.KernelOOM:
		return CauseOOMKill, "the container's init died of SIGKILL with no stop signal and no SIGKILL from outside the container: the kernel's OOM killer"
	case in.Exit != "":
		return CauseContainerRestart, "the container's init " + in.Exit + " with no stop signal: a crash"
	case in.Restarted:
		return CauseContainerRestart, "the container was restarted"
	}
	return CauseUnknown, ""
}

// exitText says how an init ended: "exited with code N" or "died of SIGX".
func exitText(code int32, sig uint32) string {
	if sig != 0 {
		return "died of " + collector.SignalName(sig)
	}
	return "exited with code " + strconv.Itoa(int(code))
}

func fromDisruption(s collector.StopEvidence) (string, string) {
	ev := "DisruptionTarget: " + s.Disruption
	switch s.Disruption {
	case "":
		return "", ""
	case disruptionPreemptionByScheduler:
		return CausePreemption, ev
	case disruptionEvictionByAPI, disruptionTaintManager:
		return CauseEviction, ev
	case disruptionPodGC:
		return CauseDelete, ev
	case disruptionByKubelet:
		if c, _ := fromStatus(s); c != "" {
			return c, ev + ", status reason " + s.Reason
		}
		return CauseNodePressure, ev
	}
	return "", ""
}

// fromStatus reads status.reason as the kubelet writes it: Evicted (node
// pressure), Preempting (kubelet preemption for a critical pod), and the
// graceful node shutdown's reason and message.
func fromStatus(s collector.StopEvidence) (string, string) {
	switch {
	case s.Reason == "Evicted":
		return CauseNodePressure, "status reason Evicted: " + s.Message
	case s.Reason == "Preempting":
		return CausePreemption, "status reason Preempting: " + s.Message
	case strings.Contains(strings.ToLower(s.Message), "node shutdown"):
		return CauseNodeShutdown, "status: " + s.Message
	}
	return "", ""
}

// probeKill tells a kubelet Killing that restarts a container (a failed
// liveness or startup probe) from one that stops the pod.
func probeKill(message string) string {
	for _, probe := range []string{"liveness", "startup"} {
		if strings.Contains(message, "failed "+probe+" probe") {
			return probe
		}
	}
	return ""
}

// fromOwner decides a deletion nothing else explains from the owner: a pod
// of a revision its owner has moved past was replaced (rollout); one of the
// current revision was removed (scale-down, or a person deleting a
// controlled pod: without audit logs the two look the same).
func fromOwner(w collector.Workload, ownerRevision string) (string, string) {
	switch w.Kind {
	case "", "none":
		return CauseDelete, "a pod without a controller was deleted"
	case "Job", "CronJob":
		return CauseDelete, "a " + w.Kind + "'s pod was deleted"
	case "DaemonSet":
		// The DaemonSet controller deletes pods to update them; its current
		// revision is not in its status, so the revision cannot tell.
		return CauseRollout, "a DaemonSet's pod was deleted"
	}
	if ownerRevision == "" || w.Revision == "" {
		return CauseUnknown, "the owner's current revision is unknown"
	}
	if w.Revision != ownerRevision {
		return CauseRollout, w.Kind + " " + w.Name + " moved from revision " + w.Revision + " to " + ownerRevision
	}
	return CauseScaleDown, w.Kind + " " + w.Name + " is still at revision " + w.Revision
}
