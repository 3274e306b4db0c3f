package kube

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/drainwatch/drainwatch/collector"
)

// NodeSink receives Node updates: the addresses the correlator names
// routing sources with. An APISink that implements it gets them.
type NodeSink interface {
	Node(collector.NodeUpdate)
}

// startNodeWatch watches this node's Node (the kubelet and kube-proxy do
// the same), or with Config.AllNodes every Node, so that traffic from other
// nodes and from their pods is named after the node rather than by
// address. Every Node is a cluster-wide watch: each Node's status updates
// (every 5 minutes at least, kubelet's nodeStatusReportFrequency) reach
// every daemon, so it is off by default. Its objects are shrunk to the
// addresses and pod CIDRs.
func (k *Kube) startNodeWatch(stop <-chan struct{}) {
	sink, ok := k.cfg.Sink.(NodeSink)
	if !ok {
		return
	}
	tweak := func(o *metav1.ListOptions) {
		if !k.cfg.AllNodes {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", k.cfg.NodeName).String()
		}
	}
	lw := cache.NewFilteredListWatchFromClient(k.client.CoreV1().RESTClient(), "nodes", metav1.NamespaceAll, tweak)
	inf := cache.NewSharedIndexInformer(lw, &corev1.Node{}, 0, cache.Indexers{})
	_ = inf.SetTransform(shrinkNode) // fails only once the informer runs
	send := func(obj any, deleted bool) {
		if n, ok := obj.(*corev1.Node); ok {
			k.counts.nodes.Add(1)
			u := nodeUpdate(n)
			u.Seen, u.Deleted = k.cfg.Now(), deleted
			sink.Node(u)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { send(obj, false) },
		UpdateFunc: func(_, obj any) { send(obj, false) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			send(obj, true)
		},
	})
	go inf.Run(stop)
}

// shrinkNode keeps a Node's name, pod CIDRs and IP addresses.
func shrinkNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion},
		Spec: corev1.NodeSpec{PodCIDR: n.Spec.PodCIDR, PodCIDRs: n.Spec.PodCIDRs}}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
			out.Status.Addresses = append(out.Status.Addresses, a)
		}
	}
	return out, nil
}

// nodeUpdate reads a Node's addresses and pod CIDRs; malformed ones are
// skipped.
func nodeUpdate(n *corev1.Node) collector.NodeUpdate {
	u := collector.NodeUpdate{Name: n.Name}
	for _, a := range n.Status.Addresses {
		if ip, err := netip.ParseAddr(a.Address); err == nil && (a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP) {
			u.Addrs = append(u.Addrs, ip)
		}
	}
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil && !slices.Contains(u.PodCIDRs, p) {
			u.PodCIDRs = append(u.PodCIDRs, p)
		}
	}
	return u
}
