package exporter_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/collector/kube"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

// boundedKinds are the workload_kind values the metrics contract allows.
var boundedKinds = map[string]bool{"Deployment": true, "StatefulSet": true, "DaemonSet": true, "ReplicaSet": true,
	"Job": true, "CronJob": true, "Rollout": true, "none": true, "other": true}

// FuzzOwnerIntoMetrics: a pod's owner reference, its revision labels and
// its ReplicaSet's annotation and controller, hostile or not (invalid
// UTF-8, huge, a kind nobody knows), resolve to a workload whose
// termination the metrics count and expose: no panic, a scrape that
// gathers, a workload_kind from the bounded set.
func FuzzOwnerIntoMetrics(f *testing.F) {
	f.Add("ReplicaSet", "web-7d9c", "7", "Deployment", "web", "", "7d9c", true)
	f.Add("ReplicaSet", "web-7d9c", "", "", "", "", "7d9c", false)
	f.Add("StatefulSet", "db", "", "", "", "db-5f7b8c", "", false)
	f.Add("Rollout", "canary", "", "", "", "", "", false)
	f.Add("ReplicaSet", "x", "\xff\xfe", "Deployment", "\xc3\x28", "\xed\xa0\x80", "", true)
	f.Add("ReplicaSet", "x", strings.Repeat("€", 100), "Deployment", "web", "", "", true)
	f.Fuzz(func(t *testing.T, kind, name, revision, rsKind, rsName, hashLabel, templateHash string, rsFound bool) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace: "shop", Name: "p", UID: "u",
			Labels:          map[string]string{"controller-revision-hash": hashLabel, "pod-template-hash": templateHash},
			OwnerReferences: []metav1.OwnerReference{{Kind: kind, Name: name, Controller: ptr.To(true)}},
		}}
		lookup := func(string, string, string) (kube.OwnerMeta, bool) {
			m := kube.OwnerMeta{Revision: revision}
			if rsKind != "" {
				m.Controller = &metav1.OwnerReference{Kind: rsKind, Name: rsName, Controller: ptr.To(true)}
			}
			return m, rsFound
		}
		w := kube.ResolveWorkload(pod, lookup)
		if w.Namespace != "shop" {
			t.Fatalf("namespace %q", w.Namespace)
		}
		end := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
		m := exporter.NewMetrics(exporter.Options{Now: func() time.Time { return end }})
		m.ObserveTermination(correlate.Termination{PodUID: "u", Pod: "p", Workload: w, Complete: true, Outcome: "refused",
			Counts: correlate.Counts{RefusedAfterSigterm: 3}, Marks: correlate.Marks{StopSignal: end.Add(-2 * time.Second), PodGone: end}})
		families, err := m.Registry().Gather()
		if err != nil {
			t.Fatalf("workload %+v: gathering: %v", w, err)
		}
		for _, mf := range families {
			for _, metric := range mf.GetMetric() {
				for _, l := range metric.GetLabel() {
					if l.GetName() == "workload_kind" && !boundedKinds[l.GetValue()] {
						t.Fatalf("%s workload_kind=%q", mf.GetName(), l.GetValue())
					}
					if len(l.GetValue()) > collector.MaxValueBytes {
						t.Fatalf("%s %s of %d bytes", mf.GetName(), l.GetName(), len(l.GetValue()))
					}
				}
			}
		}
	})
}
