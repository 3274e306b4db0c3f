package kube

import (
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/drainwatch/drainwatch/collector"
)

const triggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"

// endpointState is one endpoint's conditions in one slice.
type endpointState struct{ Ready, Serving, Terminating bool }

// sliceEntry is one EndpointSlice reduced to the endpoints of local pods.
type sliceEntry struct {
	namespace, service string
	trigger            time.Time
	pods               map[string]endpointState // by pod UID
}

// endpointTable turns EndpointSlice states into per-pod endpoint states: a
// pod's endpoint across every slice that lists it (one per service and
// address family). It is pure logic; the watch feeds it under a lock.
type endpointTable struct {
	isLocal func(uid string) bool
	slices  map[string]sliceEntry               // by namespace/name
	last    map[string]collector.EndpointUpdate // last state sent, by pod UID
}

func newEndpointTable(isLocal func(string) bool) *endpointTable {
	return &endpointTable{isLocal: isLocal, slices: make(map[string]sliceEntry), last: make(map[string]collector.EndpointUpdate)}
}

// apply records a slice's new state and returns the pods whose endpoint
// state changed.
func (t *endpointTable) apply(s *discoveryv1.EndpointSlice, seen time.Time) []collector.EndpointUpdate {
	key := s.Namespace + "/" + s.Name
	e := sliceEntry{
		namespace: s.Namespace, service: s.Labels[discoveryv1.LabelServiceName],
		pods: make(map[string]endpointState),
	}
	e.trigger, _ = time.Parse(time.RFC3339Nano, s.Annotations[triggerTimeAnnotation])
	for _, ep := range s.Endpoints {
		if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" || !t.isLocal(string(ep.TargetRef.UID)) {
			continue
		}
		e.pods[string(ep.TargetRef.UID)] = conditionsOf(ep.Conditions)
	}
	old := t.slices[key]
	t.slices[key] = e
	return t.changed(union(old.pods, e.pods), e.trigger, seen)
}

// remove forgets a deleted slice.
func (t *endpointTable) remove(ns, name string, seen time.Time) []collector.EndpointUpdate {
	key := ns + "/" + name
	old, ok := t.slices[key]
	if !ok {
		return nil
	}
	delete(t.slices, key)
	return t.changed(old.pods, time.Time{}, seen)
}

// retain drops the slices of a namespace that keep rejects: slices deleted
// while a watch restarted, or of services no longer watched.
func (t *endpointTable) retain(ns string, keep func(key string, e sliceEntry) bool, seen time.Time) []collector.EndpointUpdate {
	var out []collector.EndpointUpdate
	for key, e := range t.slices {
		if e.namespace == ns && !keep(key, e) {
			delete(t.slices, key)
			out = append(out, t.changed(e.pods, time.Time{}, seen)...)
		}
	}
	return out
}

// forget drops a pod that is gone for good.
func (t *endpointTable) forget(uid string) {
	delete(t.last, uid)
	for _, e := range t.slices {
		delete(e.pods, uid)
	}
}

// changed recomputes the given pods' states and returns those that differ
// from the last state sent.
func (t *endpointTable) changed(pods map[string]endpointState, trigger, seen time.Time) []collector.EndpointUpdate {
	var out []collector.EndpointUpdate
	for uid := range pods {
		u := t.aggregate(uid)
		prev, sent := t.last[uid]
		if !sent && !u.Present {
			continue
		}
		if sent && sameEndpointState(prev, u) {
			continue
		}
		u.Seen, u.TriggerTime = seen, trigger
		t.last[uid] = u
		out = append(out, u)
	}
	return out
}

// aggregate is a pod's endpoint across slices: present in any; ready and
// serving only if so in every slice listing it (routing through any service
// that has dropped it has started to converge); terminating if any says so.
func (t *endpointTable) aggregate(uid string) collector.EndpointUpdate {
	u := collector.EndpointUpdate{PodUID: uid, Ready: true, Serving: true}
	for _, e := range t.slices {
		st, ok := e.pods[uid]
		if !ok {
			continue
		}
		u.Present = true
		u.Ready = u.Ready && st.Ready
		u.Serving = u.Serving && st.Serving
		u.Terminating = u.Terminating || st.Terminating
	}
	if !u.Present {
		u.Ready, u.Serving = false, false
	}
	return u
}

// conditionsOf applies the API's defaults: a nil ready means ready, a nil
// serving means the same as ready, a nil terminating means not terminating.
func conditionsOf(c discoveryv1.EndpointConditions) endpointState {
	st := endpointState{Ready: c.Ready == nil || *c.Ready}
	st.Serving = st.Ready
	if c.Serving != nil {
		st.Serving = *c.Serving
	}
	st.Terminating = c.Terminating != nil && *c.Terminating
	return st
}

func sameEndpointState(a, b collector.EndpointUpdate) bool {
	return a.Present == b.Present && a.Ready == b.Ready && a.Serving == b.Serving && a.Terminating == b.Terminating
}

func union(a, b map[string]endpointState) map[string]endpointState {
	out := make(map[string]endpointState, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
