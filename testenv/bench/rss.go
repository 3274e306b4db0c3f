package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/drainwatch/drainwatch/testenv/cluster"
)

// RSS is the daemon's resident memory with Pods running on its node.
type RSS struct {
	Pods     int
	RSS, HWM int // KiB
}

// rss runs a fresh daemon for node 2 and scales a Deployment of sleepers
// bound to that node through cfg.Pods, reading VmRSS and VmHWM once the
// daemon has had time to scan and watch them (as TestRSSWith110Pods).
func (b *bench) rss(ctx context.Context) ([]RSS, error) {
	if len(b.cfg.Pods) == 0 {
		return nil, nil
	}
	nodeName := b.c.NodeNames[1]
	d, err := b.startDaemon(ctx, nodeName)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	var out []RSS
	for _, n := range b.cfg.Pods {
		start := time.Now()
		if err := b.sleepers(ctx, nodeName, n); err != nil {
			return out, err
		}
		time.Sleep(10 * time.Second) // scans, binds, a few checkpoints
		rss, hwm, err := processMemory(d.pid())
		if err != nil {
			return out, err
		}
		out = append(out, RSS{Pods: n, RSS: rss, HWM: hwm})
		b.progress("%d pods running after %v: VmRSS %d MiB, VmHWM %d MiB", n, time.Since(start).Round(time.Second), rss>>10, hwm>>10)
	}
	return out, nil
}

// sleepers applies a Deployment of n sleeping pods bound to nodeName (no
// scheduler: the node's 110-pod capacity does not stop 250) and waits
// until they run.
func (b *bench) sleepers(ctx context.Context, nodeName string, n int) error {
	const ns = "bench-rss"
	dep := cluster.ServerDeployment(ns, "sleepers", "naive", int32(n))
	dep.Spec.Template.Spec.NodeName = nodeName
	ctr := &dep.Spec.Template.Spec.Containers[0]
	ctr.Image, ctr.Args, ctr.ReadinessProbe = "local:/bin/sleep", []string{"infinity"}, nil
	if err := b.c.Apply(ctx, cluster.Namespace(ns), dep, cluster.ServiceFor(ns, "sleepers")); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := b.c.WaitRolledOut(ctx, ns, "sleepers"); err != nil {
		return fmt.Errorf("%d sleepers on %s: %w", n, nodeName, err)
	}
	return nil
}
