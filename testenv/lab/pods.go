package lab

import (
	"context"
	"fmt"
	"net"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// podRecord is a pod as the lab remembers it after it is gone.
type podRecord struct {
	UID, Name, Node, IP, Hash string
}

// podLog remembers every pod of a namespace it saw with an IP, so the
// router's records (by "ip:port") can be joined to pods and revisions after
// the pods are gone. testenv's node agents allocate pod IPs sequentially,
// so an IP names one pod for the whole lab.
type podLog struct {
	mu   sync.Mutex
	byIP map[string]podRecord
}

// watchPods starts a pod informer on ns until ctx ends.
func watchPods(ctx context.Context, cs kubernetes.Interface, ns string) (*podLog, error) {
	pl := &podLog{byIP: map[string]podRecord{}}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    pl.note,
		UpdateFunc: func(_, obj any) { pl.note(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("pod informer of %s: %w", ns, err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("pod informer of %s never synced: %w", ns, ctx.Err())
	}
	return pl, nil
}

func (pl *podLog) note(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Status.PodIP == "" {
		return
	}
	pl.mu.Lock()
	pl.byIP[p.Status.PodIP] = podRecord{UID: string(p.UID), Name: p.Name, Node: p.Spec.NodeName,
		IP: p.Status.PodIP, Hash: p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]}
	pl.mu.Unlock()
}

// byAddr returns the pod behind "ip:port".
func (pl *podLog) byAddr(addr string) (podRecord, bool) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return podRecord{}, false
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	p, ok := pl.byIP[host]
	return p, ok
}

// withHash returns the pods of one ReplicaSet (pod-template-hash).
func (pl *podLog) withHash(hash string) []podRecord {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	var out []podRecord
	for _, p := range pl.byIP {
		if p.Hash == hash {
			out = append(out, p)
		}
	}
	return out
}

// revisions maps each ReplicaSet's pod-template-hash of ns to its
// deployment.kubernetes.io/revision.
func revisions(ctx context.Context, cs kubernetes.Interface, ns string) (map[string]string, error) {
	list, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing ReplicaSets of %s: %w", ns, err)
	}
	out := map[string]string{}
	for _, rs := range list.Items {
		out[rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]] = rs.Annotations["deployment.kubernetes.io/revision"]
	}
	return out, nil
}

func typesUID(uid string) types.UID { return types.UID(uid) }
