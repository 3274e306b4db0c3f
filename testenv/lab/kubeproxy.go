package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// KubeProxyMinSync is the lab's kube-proxy minSyncPeriod: a change right
// after a sync waits this long to be programmed, the lag a busy node's
// kube-proxy has on average half of.
const KubeProxyMinSync = time.Second

var (
	kubeProxyNaive    = seedsCase{"kube-proxy/naive", "lab-kp-naive", workload.ModeNaive, nil, false}
	kubeProxyProtocol = seedsCase{"kube-proxy/protocol-1.5s", "lab-kp-protocol", workload.ModeProtocol, []string{"--drain-delay=1500ms"}, false}
)

// kubeProxyScenario runs the seeds' experiment as the seeds ran it: /work
// to a ClusterIP Service of two pods through the real kube-proxy
// (nftables) of the first node, /ready and /slow straight at the victim,
// which is deleted right after a kube-proxy sync, so its removal from the
// rules waits out minSyncPeriod. A refusal crosses the DNAT back to the
// client as ECONNREFUSED.
func kubeProxyScenario(c seedsCase) func(context.Context, *Lab) ([]Result, error) {
	return func(ctx context.Context, l *Lab) ([]Result, error) {
		r, err := l.seedsThroughKubeProxy(ctx, c)
		if err != nil {
			return nil, err
		}
		return []Result{r}, nil
	}
}

func (l *Lab) seedsThroughKubeProxy(ctx context.Context, c seedsCase) (Result, error) {
	dep := cluster.ServerDeployment(c.ns, "web", c.mode, 2, c.args...)
	pods, err := l.deploy(ctx, dep)
	if err != nil {
		return Result{}, errorf("deploying", err)
	}
	kp, victim := l.Cluster.KubeProxies[0], &pods[0]
	service, err := l.Cluster.ServiceAddr(ctx, c.ns, "web", len(pods))
	if err != nil {
		return Result{}, err
	}
	before, err := l.Cluster.SyncKubeProxy(ctx, kp, c.ns)
	if err != nil {
		return Result{}, errorf("kube-proxy sync", err)
	}
	podAddr := cluster.PodAddr(victim, cluster.ServerPort)
	l.progress.Step("%s: /work to %s through kube-proxy (%s) on %s, victim %s at %s; deleted right after a sync",
		c.name, service, kp.Mode(), kp.Node(), victim.Name, podAddr)
	res, err := client.Seeds{Dial: kp.Dial, Target: service, Pod: podAddr,
		Stop: func(ctx context.Context) error { return l.Cluster.DeletePod(ctx, victim.Namespace, victim.Name) }}.Run(ctx)
	if err != nil {
		return Result{}, errorf("seeds' clients", err)
	}
	if _, err := kp.WaitProgrammed(ctx, before); err != nil {
		return Result{}, errorf("kube-proxy", err)
	}
	note := fmt.Sprintf("through kube-proxy %s on %s (minSyncPeriod %v): ", kp.Mode(), kp.Node(), KubeProxyMinSync)
	return l.seedsResult(ctx, c.name, c.ns, victim, res, podAddr, service, note)
}
