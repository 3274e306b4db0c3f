package exporter

import (
	"strings"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
)

// Label cardinality. Every label value is drawn from a bounded set so that a
// node's series count stays proportional to the workloads it runs, never to
// the pods:
//
//   - namespace, workload: the namespaces and workloads with pods terminated
//     on this node within the TTL. A pod without a controller (kind "none")
//     gets workload="" and revision="" so that bare pods never create
//     per-pod series.
//   - workload_kind: Deployment, StatefulSet, DaemonSet, ReplicaSet, Job,
//     CronJob, Rollout (Argo Rollouts), none; anything else is "other".
//   - revision: the revisions whose pods terminated within the TTL — in a
//     rollout, the one being replaced (usually one or two per workload).
//   - namespace, workload and revision values are at most 253 bytes
//     (labelValue).
//   - outcome: clean, refused, killed, refused_and_killed, partial; anything
//     else is "unknown".
//   - cause: correlate.Causes() (rollout, scale_down, eviction, …, unknown).
//   - phase: prestop, listener_close_delay, drain, grace_used.
//   - reason: PartialReasons(), a fixed list ending in "other"; every reason
//     of a workload with series exists (at zero until it counts).
//   - probe: the fixed set of BPF programs the daemon attaches.
//   - type: collector.EventTypes() names, a fixed list.
var (
	workloadKinds = set("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob", "Rollout", "none")
	outcomes      = set(correlate.Outcomes()...)
	causes        = set(correlate.Causes()...)
)

func set(values ...string) map[string]bool {
	m := make(map[string]bool, len(values))
	for _, v := range values {
		m[v] = true
	}
	return m
}

// rolloutLabels returns the bounded label values of a workload revision:
// namespace, workload_kind, workload, revision.
func rolloutLabels(w collector.Workload) [4]string {
	kind := w.Kind
	switch {
	case kind == "":
		kind = "none"
	case !workloadKinds[kind]:
		kind = "other"
	}
	if kind == "none" {
		return [4]string{labelValue(w.Namespace), kind, "", ""}
	}
	return [4]string{labelValue(w.Namespace), kind, labelValue(w.Name), labelValue(w.Revision)}
}

// labelValue makes a value from the API a valid, bounded label value:
// valid UTF-8, at most collector.MaxValueBytes (253) bytes. Names are
// validated by the API server, annotations (the revision) are not: one
// invalid UTF-8 byte would fail every scrape of the node (Prometheus label
// values are UTF-8) for as long as the revision's series live, and a
// revision of 256 KiB would be held in every series of its revision.
// collector/kube bounds the revision the same way where it reads it, so the
// API and `timeline --revision` see the label's value.
func labelValue(v string) string {
	return collector.Truncate(v, collector.MaxValueBytes)
}

// outcomeLabel bounds Termination.Outcome to the documented values.
func outcomeLabel(outcome string) string {
	if outcomes[outcome] {
		return outcome
	}
	return "unknown"
}

// causeLabel bounds Termination.Cause to correlate.Causes().
func causeLabel(cause string) string {
	if causes[cause] {
		return cause
	}
	return correlate.CauseUnknown
}

// outcomeKey is the key of revisionState.outcomes, kept as one string so
// that the persisted counters stay a plain map. Counters persisted before
// causes existed have the outcome alone: their cause is unknown.
func outcomeKey(outcome, cause string) string { return outcome + "/" + cause }

func splitOutcomeKey(key string) (outcome, cause string) {
	outcome, cause, ok := strings.Cut(key, "/")
	if !ok {
		cause = correlate.CauseUnknown
	}
	return outcome, cause
}
