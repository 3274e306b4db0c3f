package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/drainwatch/drainwatch/testenv/cluster"
)

// RSS is the daemon's resident memory with Pods running on its node, in
// KiB: Anon is its own memory (Go heap, stacks), File the mapped pages of
// its executable, libraries and BPF maps (the ring buffer is mapped twice).
type RSS struct {
	Pods  int
	After time.Duration // since the pods run
	Memory
	// Mappings is the smaps breakdown of RSS at this reading (the raw
	// smaps is saved beside samples.json).
	Mappings []Mapping
	// IdleCPU is the daemon's CPU time per second of wall time since the
	// previous reading with as many pods (none for the first): nothing
	// terminates and nothing connects meanwhile, so it is what the daemon
	// costs a quiet node.
	IdleCPU time.Duration
}

// rssAfter are the times after the pods run at which RSS is read: once
// the daemon has scanned and bound them, and once settled, a minute later.
var rssAfter = []time.Duration{10 * time.Second, 70 * time.Second}

// rss runs a fresh daemon for node 2 (its executable out of the page
// cache first, see evictPageCache) and scales a Deployment of sleepers
// bound to that node through cfg.Pods, reading VmRSS and VmHWM once the
// daemon has had time to scan and watch them (as TestRSSWith110Pods).
func (b *bench) rss(ctx context.Context) ([]RSS, error) {
	if len(b.cfg.Pods) == 0 {
		return nil, nil
	}
	nodeName := b.c.NodeNames[1]
	if err := evictPageCache(b.cfg.Drainwatch); err != nil {
		return nil, err
	}
	d, err := b.startDaemon(ctx, nodeName)
	if err != nil {
		return nil, err
	}
	defer func() { _ = d.Stop() }()
	var out []RSS
	for _, n := range b.cfg.Pods {
		start := time.Now()
		if err := b.sleepers(ctx, nodeName, n); err != nil {
			return out, err
		}
		b.progress("%d pods running after %v", n, time.Since(start).Round(time.Second))
		running := time.Now()
		var last cpuReading
		for _, after := range rssAfter {
			time.Sleep(time.Until(running.Add(after)))
			m, err := ProcessMemory(d.PID())
			if err != nil {
				return out, err
			}
			r := RSS{Pods: n, After: after, Memory: m}
			save := filepath.Join(b.cfg.Dir, fmt.Sprintf("smaps-%dpods-%v.txt", n, after))
			if r.Mappings, err = SmapsBreakdown(d.PID(), save); err != nil {
				return out, err
			}
			now, err := readCPU(d.PID())
			if err != nil {
				return out, err
			}
			if !last.at.IsZero() {
				r.IdleCPU = now.perSecondSince(last)
			}
			last = now
			out = append(out, r)
		}
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

// cpuReading is a process's CPU time at a wall-clock time.
type cpuReading struct {
	at  time.Time
	cpu time.Duration
}

func readCPU(pid int) (cpuReading, error) {
	at := time.Now()
	cpu, err := processCPU(pid)
	return cpuReading{at: at, cpu: cpu}, err
}

// perSecondSince is the CPU time spent per second of wall time since prev.
func (r cpuReading) perSecondSince(prev cpuReading) time.Duration {
	wall := r.at.Sub(prev.at)
	if wall <= 0 {
		return 0
	}
	return time.Duration(float64(r.cpu-prev.cpu) / wall.Seconds())
}
