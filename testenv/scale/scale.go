// Package scale measures what drainwatch's kube side costs the API server
// when many nodes run it: the real control plane (testenv/controlplane),
// hollow Nodes whose pods a hollow kubelet starts and stops, one instance
// of collector/kube per node in this process (each with its own client and
// connection), and a rollout restart of thousands of pods. It reports the
// watches held, the objects and bytes sent to the daemons and the API
// server's CPU and memory for drainwatch's scoped watches beside a naive
// design, and extrapolates to a large cluster. `make scale` runs it.
package scale

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/drainwatch/drainwatch/collector/kube"
	"github.com/drainwatch/drainwatch/testenv/controlplane"
)

// Config sizes the run.
type Config struct {
	Nodes, Pods                         int
	Namespaces, DeploymentsPerNamespace int
	// Designs run in order against one cluster, one rollout each.
	Designs []Design
	// StopAfter is how long a hollow container takes to exit after its
	// stop signal.
	StopAfter time.Duration
	// RolloutTimeout bounds each rollout.
	RolloutTimeout time.Duration
	Log            zerolog.Logger
	// Progress receives one line per step.
	Progress func(format string, args ...any)
}

// Validate rejects sizes the run cannot honour.
func (c Config) Validate() error {
	switch {
	case c.Nodes < 1 || c.Namespaces < 1 || c.DeploymentsPerNamespace < 1:
		return fmt.Errorf("nodes, namespaces and deployments per namespace must be ≥ 1")
	case c.Pods < c.Namespaces*c.DeploymentsPerNamespace:
		return fmt.Errorf("%d pods cannot fill %d deployments", c.Pods, c.Namespaces*c.DeploymentsPerNamespace)
	case c.Pods > c.Nodes*100:
		return fmt.Errorf("%d pods do not fit on %d nodes of 110 pods with a rollout's surge: add nodes", c.Pods, c.Nodes)
	}
	return nil
}

// cluster is the running environment shared by every design's rollout.
type cluster struct {
	cfg       Config
	cp        *controlplane.ControlPlane
	admin     kubernetes.Interface
	daemonCfg *rest.Config
	apiPID    int
	nodes     []string
	workloads []workload
	kubelet   *hollowKubelet
	pods      int // pods the workloads want, rounded down per deployment
}

// Run starts the cluster, runs one rollout per design and returns the
// results, in the order of cfg.Designs.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if err := cfg.Validate(); err != nil {
		return Report{}, err
	}
	cp, err := controlplane.Start(ctx, controlplane.Config{Log: cfg.Log})
	if err != nil {
		return Report{}, fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() { _ = cp.Stop() }()
	c, err := newCluster(ctx, cfg, cp)
	if err != nil {
		return Report{}, err
	}
	report := Report{Config: cfg, Pods: c.pods}
	for _, d := range cfg.Designs {
		cfg.Progress("%s: rollout restart of %d pods on %d nodes", d, c.pods, len(c.nodes))
		r, err := c.measure(ctx, d)
		if err != nil {
			return report, fmt.Errorf("design %s: %w", d, err)
		}
		report.Results = append(report.Results, r)
	}
	return report, nil
}

func newCluster(ctx context.Context, cfg Config, cp *controlplane.ControlPlane) (*cluster, error) {
	c := &cluster{cfg: cfg, cp: cp, admin: cp.Client}
	c.pods = cfg.Pods / (cfg.Namespaces * cfg.DeploymentsPerNamespace) * cfg.Namespaces * cfg.DeploymentsPerNamespace
	var err error
	if c.apiPID, err = childPID("kube-apiserver"); err != nil {
		return nil, err
	}
	if c.daemonCfg, err = kube.RestConfig(cp.Kubeconfig); err != nil {
		return nil, err
	}
	cfg.Progress("registering %d nodes", cfg.Nodes)
	if c.nodes, err = registerNodes(ctx, c.admin, cfg.Nodes); err != nil {
		return nil, err
	}
	c.kubelet = newHollowKubelet(c.admin, cfg.StopAfter, cfg.Log)
	go c.kubelet.run(ctx)
	cfg.Progress("creating %d pods in %d deployments", c.pods, cfg.Namespaces*cfg.DeploymentsPerNamespace)
	if c.workloads, err = createWorkloads(ctx, c.admin, cfg); err != nil {
		return nil, err
	}
	if _, err := c.waitSettled(ctx, 2*cfg.RolloutTimeout, nil); err != nil {
		return nil, fmt.Errorf("first deployment: %w", err)
	}
	return c, nil
}
