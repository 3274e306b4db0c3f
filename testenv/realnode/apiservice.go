package realnode

import (
	"context"
	"fmt"
	"net"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drainwatch/drainwatch/testenv/netlab"
)

// serveAPIService makes the API server reachable from the node's pods at
// the `kubernetes` Service's ClusterIP:port, which the kubelet gives every
// pod as KUBERNETES_SERVICE_HOST/PORT (in-cluster clients, drainwatch's
// DaemonSet among them, dial it). There is no kube-proxy on the real node
// and the Service has no endpoints (the control plane runs no endpoint
// reconciler): the node namespace takes the ClusterIP as a local address
// and a relay there forwards to the API server's loopback, as the kubelet's
// own relay does. Pods route to it through the bridge's gateway; the API
// server's certificate names the ClusterIP.
func (n *Node) serveAPIService(ctx context.Context, apiServer string) error {
	svc, err := n.client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("the kubernetes Service: %w", err)
	}
	if svc.Spec.ClusterIP == "" || len(svc.Spec.Ports) == 0 {
		return fmt.Errorf("the kubernetes Service has no ClusterIP or port: %+v", svc.Spec)
	}
	if err := n.NS.IP(fmt.Sprintf("addr add %s/32 dev lo", svc.Spec.ClusterIP)); err != nil {
		return fmt.Errorf("adding the kubernetes Service's IP to node %s: %w", n.Name, err)
	}
	listen := net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
	if n.serviceRelay, err = netlab.StartRelay(n.NS, listen, apiServer, n.log); err != nil {
		return fmt.Errorf("kubernetes Service relay: %w", err)
	}
	return nil
}
