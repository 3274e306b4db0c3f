package cluster

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/node"
	"github.com/drainwatch/drainwatch/testenv/node/kubeletprobe"
)

// PodAddr is "podIP:port".
func PodAddr(p *corev1.Pod, port int) string {
	return net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port))
}

// PodAddr6 is "[IPv6]:port" for the pod's IPv6 address (every stand-in pod
// is dual-stack), "" when its status lists none.
func PodAddr6(p *corev1.Pod, port int) string {
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil && a.Is6() && !a.Is4In6() {
			return net.JoinHostPort(ip.IP, strconv.Itoa(port))
		}
	}
	return ""
}

// DeletePod deletes a pod the way a rollout or `kubectl delete` does (its own
// grace period): the node agent then terminates it like the kubelet.
func (c *Cluster) DeletePod(ctx context.Context, ns, name string) error {
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting pod %s/%s: %w", ns, name, err)
	}
	return nil
}

// Seeds runs the seeds' experiment on a pod, from the fabric: /slow and /ready
// straight at the pod, /work at target (the pod's own address, or a router's),
// the stop being the pod's deletion through the API. The result is the
// clients' ground truth.
func (c *Cluster) Seeds(ctx context.Context, pod *corev1.Pod, port int, target string) (client.SeedsResult, error) {
	return c.SeedsAt(ctx, pod, PodAddr(pod, port), target)
}

// SeedsAt is Seeds with /slow and /ready sent to podAddr, one of the pod's
// addresses (PodAddr6 for its IPv6 one).
func (c *Cluster) SeedsAt(ctx context.Context, pod *corev1.Pod, podAddr, target string) (client.SeedsResult, error) {
	s := client.Seeds{Dial: c.Dial, Target: target, Pod: podAddr,
		Stop: func(ctx context.Context) error { return c.DeletePod(ctx, pod.Namespace, pod.Name) }}
	return s.Run(ctx)
}

// Terminations returns what the node agents did to stop the pod's
// containers (Killing, preStop, stop signal, SIGKILL, exit, with times).
func (c *Cluster) Terminations(uid types.UID) []node.Termination {
	var out []node.Termination
	for _, a := range c.Nodes {
		out = append(out, a.Terminations(uid)...)
	}
	return out
}

// WaitRestarted waits until the agent has finished killing one of the
// pod's containers for a restart and returns that kill's record.
func (c *Cluster) WaitRestarted(ctx context.Context, uid types.UID) (node.Termination, error) {
	for {
		for _, a := range c.Nodes {
			if rs := a.Restarts(uid); len(rs) > 0 && !rs[0].ExitAt.IsZero() {
				return rs[0], nil
			}
		}
		select {
		case <-ctx.Done():
			return node.Termination{}, fmt.Errorf("no container of pod %s restarted: %w", uid, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

// WaitTerminated waits until a container of the pod has exited and returns
// its termination record.
func (c *Cluster) WaitTerminated(ctx context.Context, uid types.UID) (node.Termination, error) {
	for {
		for _, t := range c.Terminations(uid) {
			if !t.ExitAt.IsZero() {
				return t, nil
			}
		}
		select {
		case <-ctx.Done():
			return node.Termination{}, fmt.Errorf("pod %s not terminated: %w", uid, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

// ProbeRefusals counts the kubelet prober's attempts at pod refused since
// `since` (the deletion, or the stop), on any port, from its node agent's
// own log: the ground truth for drainwatch's probe_refused (the prober runs
// as a process named kubelet in the node's network namespace, like the
// real kubelet). An attempt is the termination's when it ended at or after
// since: the RST came between its start and its end, and a probe that
// started just before the stop signal is refused after it when its SYN
// meets the closed listener. A probe refused while the server was still
// starting is not part of a termination.
func (c *Cluster) ProbeRefusals(pod *corev1.Pod, since time.Time) (int, error) {
	for i, name := range c.NodeNames {
		if name != pod.Spec.NodeName {
			continue
		}
		attempts, dropped, err := c.Nodes[i].ProbeLog()
		if err != nil {
			return 0, err
		}
		if dropped > 0 && len(attempts) > 0 && attempts[0].End.After(since) {
			return 0, fmt.Errorf("node %s: the prober's log (the newest %d attempts) no longer reaches back to %v", name, len(attempts), since)
		}
		n := 0
		for _, a := range attempts {
			if a.Pod == pod.Namespace+"/"+pod.Name && a.Outcome == kubeletprobe.Refused && !a.End.Before(since) {
				n++
			}
		}
		return n, nil
	}
	return 0, fmt.Errorf("pod %s/%s: node %q is not one of the cluster's", pod.Namespace, pod.Name, pod.Spec.NodeName)
}
