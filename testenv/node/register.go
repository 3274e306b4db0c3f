package node

import (
	"context"
	"fmt"
	"time"

	"github.com/drainwatch/drainwatch/testenv/netlab"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kubelet defaults for node liveness.
const (
	leaseDuration   = 40 * time.Second
	leaseRenew      = 10 * time.Second
	statusFrequency = time.Minute
	leaseNamespace  = "kube-node-lease"
)

// KubeletVersion is what the Node reports as its kubelet version.
const KubeletVersion = "v1.37.2"

func (a *Agent) nodeObject() *corev1.Node {
	labels := map[string]string{"kubernetes.io/hostname": a.cfg.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
	for k, v := range a.cfg.Labels {
		labels[k] = v
	}
	cidr := netlab.PodCIDR(a.cfg.Index)
	// Like the kubelet, register with the status filled in, so the scheduler
	// never sees this node without allocatable resources.
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: a.cfg.Name, Labels: labels},
		Spec:       corev1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr, netlab.PodCIDR6(a.cfg.Index)}},
		Status:     a.nodeStatus(),
	}
}

func (a *Agent) nodeStatus() corev1.NodeStatus {
	now := metav1.NewTime(time.Now())
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	return corev1.NodeStatus{
		Capacity: capacity, Allocatable: capacity,
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
		},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: netlab.NodeIP(a.cfg.Index)},
			{Type: corev1.NodeHostName, Address: a.cfg.Name}},
		NodeInfo: corev1.NodeSystemInfo{KubeletVersion: KubeletVersion, OperatingSystem: "linux", Architecture: "amd64",
			ContainerRuntimeVersion: "containerd://testenv", OSImage: "drainwatch testenv"},
	}
}

// register creates the Node (or adopts an existing one of the same name)
// and reports it Ready.
func (a *Agent) register(ctx context.Context) error {
	nodes := a.cfg.Client.CoreV1().Nodes()
	n, err := nodes.Create(ctx, a.nodeObject(), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		n, err = nodes.Get(ctx, a.cfg.Name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("registering node %s: %w", a.cfg.Name, err)
	}
	if n.Spec.PodCIDR != "" && n.Spec.PodCIDR != netlab.PodCIDR(a.cfg.Index) {
		return fmt.Errorf("node %s already exists with podCIDR %s, not %s", a.cfg.Name, n.Spec.PodCIDR, netlab.PodCIDR(a.cfg.Index))
	}
	return a.updateNodeStatus(ctx, n)
}

func (a *Agent) updateNodeStatus(ctx context.Context, n *corev1.Node) error {
	prev := map[corev1.NodeConditionType]corev1.NodeCondition{}
	for _, c := range n.Status.Conditions {
		prev[c.Type] = c
	}
	n = n.DeepCopy()
	n.Status = a.nodeStatus()
	for i, c := range n.Status.Conditions {
		if p, ok := prev[c.Type]; ok && p.Status == c.Status {
			n.Status.Conditions[i].LastTransitionTime = p.LastTransitionTime // only the heartbeat moves
		}
	}
	if _, err := a.cfg.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node %s status: %w", a.cfg.Name, err)
	}
	return nil
}

// heartbeat renews the node Lease every 10 s and re-posts the Ready status
// every minute, until ctx ends.
func (a *Agent) heartbeat(ctx context.Context) {
	lease, status := time.NewTicker(leaseRenew), time.NewTicker(statusFrequency)
	defer lease.Stop()
	defer status.Stop()
	a.renewLease(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-lease.C:
			a.renewLease(ctx)
		case <-status.C:
			n, err := a.cfg.Client.CoreV1().Nodes().Get(ctx, a.cfg.Name, metav1.GetOptions{})
			if err == nil {
				err = a.updateNodeStatus(ctx, n)
			}
			if err != nil && ctx.Err() == nil {
				a.log.Warn().Err(err).Msg("node status heartbeat")
			}
		}
	}
}

func (a *Agent) renewLease(ctx context.Context) {
	leases := a.cfg.Client.CoordinationV1().Leases(leaseNamespace)
	now := metav1.NewMicroTime(time.Now())
	secs := int32(leaseDuration.Seconds())
	l, err := leases.Get(ctx, a.cfg.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.Name, Namespace: leaseNamespace},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &a.cfg.Name, LeaseDurationSeconds: &secs, RenewTime: &now}}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
	} else if err == nil {
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &a.cfg.Name, &secs, &now
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil && ctx.Err() == nil {
		a.log.Warn().Err(err).Msg("renewing node lease")
	}
}
