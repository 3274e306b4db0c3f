package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/drainwatch/drainwatch/collector"
)

func ownedPod(kind, name string, podLabels map[string]string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p", Labels: podLabels}}
	if kind != "" {
		p.OwnerReferences = []metav1.OwnerReference{
			{Kind: "SomethingElse", Name: "not-the-controller"},
			{Kind: kind, Name: name, Controller: ptr.To(true)},
		}
	}
	return p
}

func TestResolveWorkload(t *testing.T) {
	controller := func(kind, name string) *metav1.OwnerReference {
		return &metav1.OwnerReference{Kind: kind, Name: name, Controller: ptr.To(true)}
	}
	owners := map[string]OwnerMeta{
		"ReplicaSet/shop/web-7d9f":    {Revision: "4", Controller: controller("Deployment", "web")},
		"ReplicaSet/shop/bare-rs":     {Revision: ""},
		"ReplicaSet/shop/rolled-back": {Revision: "7", Controller: controller("Deployment", "api")},
		"ReplicaSet/shop/canary-6c7d": {Revision: "3", Controller: controller("Rollout", "canary")},
		"Job/shop/backup-29012345":    {Controller: controller("CronJob", "backup")},
		"Job/shop/migrate":            {},
	}
	lookup := func(kind, ns, name string) (OwnerMeta, bool) { m, ok := owners[kind+"/"+ns+"/"+name]; return m, ok }
	tests := []struct {
		name string
		pod  *corev1.Pod
		want collector.Workload
	}{
		{"deployment", ownedPod("ReplicaSet", "web-7d9f", nil), wl("shop", "Deployment", "web", "4")},
		{"rollback revision", ownedPod("ReplicaSet", "rolled-back", nil), wl("shop", "Deployment", "api", "7")},
		{"bare replicaset", ownedPod("ReplicaSet", "bare-rs", nil), wl("shop", "ReplicaSet", "bare-rs", "")},
		{"replicaset gone, named by template hash", ownedPod("ReplicaSet", "cart-5c6b", map[string]string{"pod-template-hash": "5c6b"}),
			wl("shop", "Deployment", "cart", "")},
		{"replicaset gone, no hash", ownedPod("ReplicaSet", "x", nil), wl("shop", "ReplicaSet", "x", "")},
		{"statefulset", ownedPod("StatefulSet", "db", map[string]string{"controller-revision-hash": "db-6f7c"}),
			wl("shop", "StatefulSet", "db", "db-6f7c")},
		{"daemonset", ownedPod("DaemonSet", "agent", map[string]string{"controller-revision-hash": "8b9a"}),
			wl("shop", "DaemonSet", "agent", "8b9a")},
		{"argo rollout: its template hash", ownedPod("ReplicaSet", "canary-6c7d", map[string]string{"rollouts-pod-template-hash": "6c7d"}),
			wl("shop", "Rollout", "canary", "6c7d")},
		{"argo rollout, pod without the hash", ownedPod("ReplicaSet", "canary-6c7d", nil), wl("shop", "Rollout", "canary", "3")},
		{"argo replicaset gone, named by its hash", ownedPod("ReplicaSet", "canary-5b8f", map[string]string{"rollouts-pod-template-hash": "5b8f"}),
			wl("shop", "Rollout", "canary", "5b8f")},
		{"deployment's hash label is not argo's", ownedPod("ReplicaSet", "web-7d9f", map[string]string{"pod-template-hash": "7d9f", "rollouts-pod-template-hash": "x"}),
			wl("shop", "Deployment", "web", "4")},
		{"job", ownedPod("Job", "migrate", nil), wl("shop", "Job", "migrate", "")},
		{"cronjob's job", ownedPod("Job", "backup-29012345", nil), wl("shop", "CronJob", "backup", "")},
		{"job gone", ownedPod("Job", "gone", nil), wl("shop", "Job", "gone", "")},
		{"bare pod", ownedPod("", "", nil), wl("shop", "none", "", "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ResolveWorkload(tt.pod, lookup); got != tt.want {
				t.Fatalf("ResolveWorkload = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func wl(ns, kind, name, revision string) collector.Workload {
	return collector.Workload{Namespace: ns, Kind: kind, Name: name, Revision: revision}
}
