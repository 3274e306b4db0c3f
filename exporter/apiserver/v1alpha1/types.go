// Package v1alpha1 holds the types of the aggregated API drainwatch.io/v1alpha1
// that drainwatch-apiserver (package apiserver) serves: its clients
// (drainwatch timeline, advise and rollout) decode them without linking the
// server.
package v1alpha1

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

// GroupName is the API group, the one the daemons' own RBAC checks name
// (daemon.APIGroup).
const GroupName = "drainwatch.io"

// SchemeGroupVersion is the API's only version.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// The labels of every object, which label selectors select on. Equality on
// workload, revision, pod and node is passed on to the daemons (node: only
// that node's daemon is asked); any selector is applied to the answers.
const (
	LabelNode         = "drainwatch.io/node"
	LabelWorkloadKind = "drainwatch.io/workload-kind"
	LabelWorkload     = "drainwatch.io/workload"
	LabelRevision     = "drainwatch.io/revision"
	LabelPod          = "drainwatch.io/pod"
	LabelContainer    = "drainwatch.io/container"
)

// Termination is one termination as its node's daemon recorded it (the
// daemon API's record, under record). Its name is the pod's name and the
// first 8 characters of its UID ("web-7d4b9-x2x1k.3f2a9c1e"), and for a
// container's termination the container and the start in Unix seconds
// after that: pod names repeat (a StatefulSet's), records must not.
type Termination struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Record            exporter.TerminationView `json:"record"`
}

// TerminationList is a list of terminations. Unanswered names the nodes
// whose daemons did not answer (the list lacks their records); the same
// is sent as a warning, which kubectl prints.
type TerminationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Termination `json:"items"`
	Unanswered      []NodeError   `json:"unanswered,omitempty"`
}

// Startup is one new pod's startup as its node's daemon recorded it, named
// like a pod's termination.
type Startup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Record            correlate.Startup `json:"record"`
}

// StartupList is a list of startups; Unanswered as in TerminationList, and
// Truncated names the nodes that held more matching startups than one of
// their lists carries (their latest are listed).
type StartupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Startup   `json:"items"`
	Unanswered      []NodeError `json:"unanswered,omitempty"`
	Truncated       []string    `json:"truncated,omitempty"`
}

// NodeError is a node whose daemon did not answer, and why.
type NodeError struct {
	Node  string `json:"node"`
	Error string `json:"error"`
}

// AddToScheme registers the types in the API's version and, the same Go
// types, as the internal version: there is nothing to convert.
func AddToScheme(s *runtime.Scheme) error {
	for _, gv := range []schema.GroupVersion{SchemeGroupVersion, {Group: GroupName, Version: runtime.APIVersionInternal}} {
		s.AddKnownTypes(gv, &Termination{}, &TerminationList{}, &Startup{}, &StartupList{})
	}
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

// The deep copies go through JSON: a record is a deep tree of the
// correlate package's types, copied at most once per object served; a
// generated copy of every type it holds would be code to keep in step for
// nothing faster that matters here.

func copyJSON[T any](in T) T {
	var out T
	b, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		panic("apiserver: a record that does not survive JSON: " + err.Error())
	}
	return out
}

// DeepCopyObject implements runtime.Object.
func (t *Termination) DeepCopyObject() runtime.Object {
	if t == nil {
		return nil
	}
	out := &Termination{TypeMeta: t.TypeMeta, Record: copyJSON(t.Record)}
	t.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *TerminationList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &TerminationList{TypeMeta: l.TypeMeta, Unanswered: append([]NodeError(nil), l.Unanswered...)}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Termination, len(l.Items))
		for i := range l.Items {
			out.Items[i] = *l.Items[i].DeepCopyObject().(*Termination)
		}
	}
	return out
}

// DeepCopyObject implements runtime.Object.
func (s *Startup) DeepCopyObject() runtime.Object {
	if s == nil {
		return nil
	}
	out := &Startup{TypeMeta: s.TypeMeta, Record: copyJSON(s.Record)}
	s.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *StartupList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &StartupList{TypeMeta: l.TypeMeta, Unanswered: append([]NodeError(nil), l.Unanswered...),
		Truncated: append([]string(nil), l.Truncated...)}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Startup, len(l.Items))
		for i := range l.Items {
			out.Items[i] = *l.Items[i].DeepCopyObject().(*Startup)
		}
	}
	return out
}
