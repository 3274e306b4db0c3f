package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// ServiceAddr waits until the Service's EndpointSlices list ready
// endpoints, one per pod, and returns the ClusterIP:port clients dial
// (SyncKubeProxy then has kube-proxy program them).
func (c *Cluster) ServiceAddr(ctx context.Context, ns, name string, ready int) (string, error) {
	svc, err := c.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("service %s/%s: %w", ns, name, err)
	}
	for {
		n, err := c.readyEndpoints(ctx, ns, name)
		if err != nil {
			return "", err
		}
		if n == ready {
			return net.JoinHostPort(svc.Spec.ClusterIP, "80"), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("service %s/%s: never %d ready endpoints (%d): %w", ns, name, ready, n, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) readyEndpoints(ctx context.Context, ns, name string) (int, error) {
	list, err := c.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return 0, fmt.Errorf("endpoint slices of %s/%s: %w", ns, name, err)
	}
	n := 0
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				n++
			}
		}
	}
	return n, nil
}

// SyncKubeProxy makes kube-proxy sync right now (a new Service "nudge" in
// ns it must program) and returns its metrics after that sync: every
// change it had received is programmed, and the next change waits out
// minSyncPeriod from here.
func (c *Cluster) SyncKubeProxy(ctx context.Context, kp *kubeproxy.Proxy, ns string) (kubeproxy.Metrics, error) {
	before, err := kp.Metrics(ctx)
	if err != nil {
		return kubeproxy.Metrics{}, err
	}
	nudge := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nudge"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "none"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, nudge, metav1.CreateOptions{}); err != nil {
		return kubeproxy.Metrics{}, fmt.Errorf("creating service %s/nudge: %w", ns, err)
	}
	return kp.WaitProgrammed(ctx, before)
}
