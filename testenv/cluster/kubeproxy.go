package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/drainwatch/drainwatch/testenv/kubeproxy"
	"github.com/drainwatch/drainwatch/testenv/netlab"
)

// startKubeProxies runs the real kube-proxy in every node's namespace, in
// opts.KubeProxy's mode, and waits for each one's first sync.
func (c *Cluster) startKubeProxies(ctx context.Context, opts Options) error {
	for i, a := range c.Nodes {
		p, err := kubeproxy.Start(ctx, kubeproxy.Config{Mode: opts.KubeProxy, Node: c.NodeNames[i], NS: a.NodeNS(),
			BinDir: c.CP.BinDir, Dir: filepath.Join(c.Dir, "kube-proxy", c.NodeNames[i]), Rest: c.RestConfig,
			ClusterCIDR: netlab.PodNetwork, MinSync: opts.KubeProxyMinSync, Sync: opts.KubeProxySync, Log: c.log})
		if err != nil {
			return fmt.Errorf("kube-proxy on %s: %w", c.NodeNames[i], err)
		}
		c.KubeProxies = append(c.KubeProxies, p)
	}
	return nil
}

// stopKubeProxies stops them before their node namespaces go.
func (c *Cluster) stopKubeProxies() error {
	var errs []error
	for _, p := range c.KubeProxies {
		errs = append(errs, p.Stop())
	}
	c.KubeProxies = nil
	return errors.Join(errs...)
}
