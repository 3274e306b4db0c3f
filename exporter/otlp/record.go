package otlp

import (
	"encoding/json"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
)

// Event names of the log records drainwatch sends.
const (
	EventTermination = "drainwatch.termination"
	EventStartup     = "drainwatch.startup"
)

// Attribute keys beside the Kubernetes semantic conventions'.
const (
	// AttrRecordID is the record's stable id: the pod UID (and container)
	// and the start of the termination or startup. A record sent twice (at
	// least once delivery: after a crash, the batch in flight) carries the
	// same id, so a backend can deduplicate on it.
	AttrRecordID = "drainwatch.record.id"
	attrPrefix   = "drainwatch."
)

// Entry is one record to send: what the store keeps, turned into the log
// record's parts.
type Entry struct {
	ID        string
	EventName string
	Time      time.Time // the last mark: when the record completed
	Body      string
	Resource  []attribute.KeyValue
	Attrs     []attribute.KeyValue
	// Seq is the record's place in its Source, set by Pending for
	// Acknowledge.
	Seq uint64
}

// TerminationID is a termination's record id.
func TerminationID(t correlate.Termination) string {
	id := t.PodUID
	if t.Container != "" {
		id += "/" + t.Container
	}
	return id + "@" + t.Start().UTC().Format(time.RFC3339Nano)
}

// StartupID is a startup's record id.
func StartupID(s correlate.Startup) string {
	return s.PodUID + "@startup@" + s.Marks.Created.UTC().Format(time.RFC3339Nano)
}

// Termination turns a complete termination into an Entry: the pod's
// resource attributes (k8s.*), its counts and marks flattened
// (drainwatch.counts.refused_after_sigterm, drainwatch.marks.sigterm_sent,
// the names the API uses), the cause, diagnoses and outcome.
func Termination(t correlate.Termination) Entry {
	e := Entry{ID: TerminationID(t), EventName: EventTermination, Time: correlate.Marks.Last(t.Marks),
		Resource: resource(t.Workload, t.Pod, t.PodUID, t.Node)}
	if t.Container != "" {
		e.Resource = append(e.Resource, attribute.String("k8s.container.name", t.Container))
	}
	e.Attrs = append(e.Attrs, attribute.String(AttrRecordID, e.ID), attribute.String(attrPrefix+"record.kind", "termination"))
	e.Attrs = append(e.Attrs, flatten(attrPrefix+"counts.", t.Counts)...)
	e.Attrs = append(e.Attrs, flatten(attrPrefix+"marks.", t.Marks)...)
	e.Attrs = append(e.Attrs, attribute.Int64(attrPrefix+"grace_period_ms", t.GracePeriod.Milliseconds()),
		attribute.Int64(attrPrefix+"exit_code", int64(t.ExitCode)), attribute.Bool(attrPrefix+"partial", t.Partial))
	if t.PodIP.IsValid() {
		e.Attrs = append(e.Attrs, attribute.String("k8s.pod.ip", t.PodIP.String()))
	}
	if t.ExitSignal != 0 {
		e.Attrs = append(e.Attrs, attribute.Int64(attrPrefix+"exit_signal", int64(t.ExitSignal)))
	}
	if t.Cause != "" {
		e.Attrs = append(e.Attrs, attribute.String(attrPrefix+"cause", t.Cause))
	}
	if t.Outcome != "" {
		e.Attrs = append(e.Attrs, attribute.String(attrPrefix+"outcome", t.Outcome))
	}
	if len(t.PartialReasons) > 0 {
		e.Attrs = append(e.Attrs, attribute.StringSlice(attrPrefix+"partial_reasons", t.PartialReasons))
	}
	e.Attrs = append(e.Attrs, diagnoses(t.Diagnoses)...)
	e.Body = body("termination", t.Workload, t.Pod, t.Counts)
	return e
}

// Startup turns a complete startup into an Entry.
func Startup(s correlate.Startup, node string) Entry {
	e := Entry{ID: StartupID(s), EventName: EventStartup, Time: s.Marks.WindowEnd,
		Resource: resource(s.Workload, s.Pod, s.PodUID, node)}
	e.Attrs = append(e.Attrs, attribute.String(AttrRecordID, e.ID), attribute.String(attrPrefix+"record.kind", "startup"))
	e.Attrs = append(e.Attrs, flatten(attrPrefix+"counts.", s.Counts)...)
	e.Attrs = append(e.Attrs, flatten(attrPrefix+"marks.", s.Marks)...)
	e.Attrs = append(e.Attrs, attribute.Bool(attrPrefix+"partial", s.Partial))
	e.Attrs = append(e.Attrs, diagnoses(s.Diagnoses)...)
	e.Body = body("startup", s.Workload, s.Pod, s.Counts)
	return e
}

// resource: the semantic conventions' Kubernetes attributes of the pod
// and its workload (k8s.deployment.name for a Deployment's pods, and so on).
func resource(w collector.Workload, pod, uid, node string) []attribute.KeyValue {
	kvs := []attribute.KeyValue{
		attribute.String("service.name", "drainwatch"),
		attribute.String("k8s.namespace.name", w.Namespace),
		attribute.String("k8s.pod.name", pod),
		attribute.String("k8s.pod.uid", uid),
	}
	if node != "" {
		kvs = append(kvs, attribute.String("k8s.node.name", node))
	}
	if k := workloadKey[w.Kind]; k != "" && w.Name != "" {
		kvs = append(kvs, attribute.String(k, w.Name))
	}
	if w.Kind != "" {
		kvs = append(kvs, attribute.String(attrPrefix+"workload.kind", w.Kind), attribute.String(attrPrefix+"workload.name", w.Name))
	}
	if w.Revision != "" {
		kvs = append(kvs, attribute.String(attrPrefix+"workload.revision", w.Revision))
	}
	return kvs
}

var workloadKey = map[string]string{
	"Deployment":  "k8s.deployment.name",
	"ReplicaSet":  "k8s.replicaset.name",
	"StatefulSet": "k8s.statefulset.name",
	"DaemonSet":   "k8s.daemonset.name",
	"Job":         "k8s.job.name",
	"CronJob":     "k8s.cronjob.name",
}

// flatten turns a struct of counts or marks into attributes named prefix
// and its JSON names: numbers as integers, times as RFC 3339 strings; zero times (marks
// not reached) are left out, as the API leaves them.
func flatten(prefix string, v any) []attribute.KeyValue {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []attribute.KeyValue
	for _, k := range keys {
		name := prefix + k
		switch x := m[k].(type) {
		case float64:
			out = append(out, attribute.Int64(name, int64(x)))
		case string:
			if x != "" && !strings.HasPrefix(x, "0001-01-01") {
				out = append(out, attribute.String(name, x))
			}
		case bool:
			out = append(out, attribute.Bool(name, x))
		}
	}
	return out
}

func diagnoses(ds []correlate.Diagnosis) []attribute.KeyValue {
	if len(ds) == 0 {
		return nil
	}
	codes := make([]string, 0, len(ds))
	fixes := make([]string, 0, len(ds))
	for _, d := range ds {
		codes = append(codes, d.Code)
		if d.Fix != "" {
			fixes = append(fixes, d.Fix)
		}
	}
	kvs := []attribute.KeyValue{attribute.StringSlice(attrPrefix+"diagnoses", codes)}
	if len(fixes) > 0 {
		kvs = append(kvs, attribute.StringSlice(attrPrefix+"fixes", fixes))
	}
	return kvs
}

// body is a one-line summary for backends that show the body only.
func body(kind string, w collector.Workload, pod string, counts any) string {
	var nonzero []string
	for _, kv := range flatten("", counts) {
		if kv.Value.AsInt64() != 0 {
			nonzero = append(nonzero, string(kv.Key)+"="+kv.Value.Emit())
		}
	}
	s := "drainwatch " + kind + " of " + w.Namespace + "/" + pod
	if w.Kind != "" {
		s += " (" + w.Kind + " " + w.Name + ")"
	}
	if len(nonzero) == 0 {
		return s + ": nothing lost"
	}
	return s + ": " + strings.Join(nonzero, " ")
}
