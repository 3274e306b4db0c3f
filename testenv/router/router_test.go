package router

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
	"github.com/drainwatch/drainwatch/testenv/netlab"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

func TestMain(m *testing.M) { cptest.Main(m) }

// lab is a network namespace with two backend addresses on a bridge:
// the router, its backends and its client all live in it. EndpointSlices
// refuse loopback addresses, and the root namespace must not carry pod
// addresses, so the test gets a namespace of its own.
func lab(t *testing.T) *netlab.NS {
	t.Helper()
	privileged.RequireRoot(t)
	ns, err := netlab.New("router-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	// A bridge without ports still delivers to its own addresses (no dummy
	// link module on every kernel).
	if err := ns.Bridge("br0", ip2+"/24"); err != nil {
		t.Fatal(err)
	}
	if err := ns.IP("addr add " + ip3 + "/24 dev br0"); err != nil {
		t.Fatal(err)
	}
	return ns
}

// Backend addresses (the pod CIDR of a node index netlab's clusters never use).
var ip2, ip3 = netlab.PodIP(249, 2), netlab.PodIP(249, 3)

const backendPort = 8080

// backend serves /work on addr inside ns until the test ends or it is closed.
func backend(t *testing.T, ns *netlab.NS, addr string) *http.Server {
	t.Helper()
	ln, err := ns.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return srv
}

func endpointSlice(ready3 bool) *discoveryv1.EndpointSlice {
	ep := func(ip string, ready bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{
			Ready: ptr.To(ready), Serving: ptr.To(true), Terminating: ptr.To(!ready)}}
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "echo-1", Labels: map[string]string{
			discoveryv1.LabelServiceName: "echo", discoveryv1.LabelManagedBy: "testenv"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{ep(ip2, true), ep(ip3, ready3)},
		Ports:       []discoveryv1.EndpointPort{{Port: ptr.To(int32(backendPort))}},
	}
}

func createService(ctx context.Context, t *testing.T, c kubernetes.Interface) string {
	t.Helper()
	ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "router-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// No selector: the endpointslice controller leaves this Service's
	// slices to us.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := c.CoreV1().Services(ns.Name).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func startRouter(ctx context.Context, t *testing.T, c kubernetes.Interface, lab *netlab.NS, ns string, delay time.Duration) *Router {
	t.Helper()
	ln, err := lab.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Start(ctx, Config{Client: c, Namespace: ns, Service: "echo", Delay: delay, Listener: ln,
		Dial: lab.Dial, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
