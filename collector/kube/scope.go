package kube

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// PodScope says which of the node's pods drainwatch observes: the others
// never reach the correlator, so their network namespaces and cgroups are
// never watched in the kernel (they cost one informer entry each), their
// Events and EndpointSlices are not read, and no termination of theirs is
// recorded. The zero value admits every pod.
type PodScope struct {
	// Namespaces admits only pods in these namespaces; empty admits all.
	Namespaces []string
	// ExcludeNamespaces leaves out the pods of these namespaces.
	ExcludeNamespaces []string
	// Selector admits only pods whose labels match; nil admits all.
	Selector labels.Selector
}

// ParsePodScope builds a PodScope from comma-separated namespace lists and
// a label selector in kubectl's syntax ("app=web,tier!=batch").
func ParsePodScope(namespaces, exclude, selector string) (PodScope, error) {
	var s PodScope
	var err error
	if s.Namespaces, err = namespaceList("--namespaces", namespaces); err != nil {
		return s, err
	}
	if s.ExcludeNamespaces, err = namespaceList("--exclude-namespaces", exclude); err != nil {
		return s, err
	}
	for _, ns := range s.Namespaces {
		if slices.Contains(s.ExcludeNamespaces, ns) {
			return s, fmt.Errorf("namespace %q is both in --namespaces and --exclude-namespaces", ns)
		}
	}
	if strings.TrimSpace(selector) != "" {
		if s.Selector, err = labels.Parse(selector); err != nil {
			return s, fmt.Errorf("--pod-selector %q: %w", selector, err)
		}
	}
	return s, nil
}

func namespaceList(flag, list string) ([]string, error) {
	var out []string
	for _, ns := range strings.Split(list, ",") {
		ns = strings.TrimSpace(ns)
		if ns == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("%s: %q is not a namespace name: %s", flag, ns, strings.Join(errs, "; "))
		}
		if !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out, nil
}

// All reports whether the scope admits every pod.
func (s PodScope) All() bool {
	return len(s.Namespaces) == 0 && len(s.ExcludeNamespaces) == 0 && (s.Selector == nil || s.Selector.Empty())
}

// Admits reports whether the scope admits the pod as it is now.
func (s PodScope) Admits(pod *corev1.Pod) bool {
	if len(s.Namespaces) > 0 && !slices.Contains(s.Namespaces, pod.Namespace) {
		return false
	}
	if slices.Contains(s.ExcludeNamespaces, pod.Namespace) {
		return false
	}
	return s.Selector == nil || s.Selector.Matches(labels.Set(pod.Labels))
}

// String describes the scope for the startup log.
func (s PodScope) String() string {
	if s.All() {
		return "every pod"
	}
	var parts []string
	if len(s.Namespaces) > 0 {
		parts = append(parts, "namespaces "+strings.Join(s.Namespaces, ","))
	}
	if len(s.ExcludeNamespaces) > 0 {
		parts = append(parts, "not namespaces "+strings.Join(s.ExcludeNamespaces, ","))
	}
	if s.Selector != nil && !s.Selector.Empty() {
		parts = append(parts, "labels "+s.Selector.String())
	}
	return strings.Join(parts, "; ")
}

// scopeMemory decides each pod once: a pod the scope admitted stays
// observed until it is deleted, even if its labels change, so that no
// termination is seen in half; one it never admitted is ignored. Used only
// from the informer's handler goroutine.
type scopeMemory struct {
	scope    PodScope
	admitted map[types.UID]bool
}

func (m *scopeMemory) admits(pod *corev1.Pod) bool {
	if m.scope.All() || m.admitted[pod.UID] {
		return true
	}
	if !m.scope.Admits(pod) {
		return false
	}
	if m.admitted == nil {
		m.admitted = map[types.UID]bool{}
	}
	m.admitted[pod.UID] = true
	return true
}

// forget drops a deleted pod, reporting whether it was observed.
func (m *scopeMemory) forget(pod *corev1.Pod) bool {
	if m.scope.All() {
		return true
	}
	was := m.admitted[pod.UID]
	delete(m.admitted, pod.UID)
	return was
}
