package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/transport"

	"github.com/drainwatch/drainwatch/exporter"
)

// DaemonsConfig is how the server finds and reaches the daemons.
type DaemonsConfig struct {
	// Namespace and Service name the daemons' Service (the chart's
	// headless <fullname>-metrics): its EndpointSlices list each daemon's
	// address, node and port, kept current by the EndpointSlice
	// controller. One watch, whatever the number of nodes.
	Namespace, Service string
	// Port is the name of the Service's port to use ("metrics"); empty
	// takes the first.
	Port string
	// CAFile verifies the daemons' serving certificate, issued for
	// ServerName (the chart's: <fullname>-metrics.<namespace>.svc). Empty:
	// plain HTTP, for daemons without TLS (the lab).
	CAFile, ServerName string
	// TokenFile is a token bound to the daemons' audience
	// (daemon.TokenAudience), re-read as the kubelet renews it (a projected
	// serviceAccountToken volume). Empty: no token (daemons with
	// --auth=none).
	TokenFile string
	// Timeout bounds one request to one daemon.
	Timeout time.Duration
	// Dial opens the connections to the daemons; nil is the default
	// dialer. The tests dial into the network namespace the daemons
	// listen in.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// daemonSet is the daemons as the EndpointSlices of their Service list
// them.
type daemonSet struct {
	cfg    DaemonsConfig
	client *http.Client
	slices discoverylisters.EndpointSliceNamespaceLister
	synced cache.InformerSynced
	scheme string
}

func newDaemonSet(cs kubernetes.Interface, cfg DaemonsConfig) (*daemonSet, informers.SharedInformerFactory, error) {
	client, err := daemonClient(cfg)
	if err != nil {
		return nil, nil, err
	}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = discoveryv1.LabelServiceName + "=" + cfg.Service
		}))
	inf := f.Discovery().V1().EndpointSlices()
	ds := &daemonSet{cfg: cfg, client: client, slices: inf.Lister().EndpointSlices(cfg.Namespace),
		synced: inf.Informer().HasSynced, scheme: "https"}
	if cfg.CAFile == "" {
		ds.scheme = "http"
	}
	return ds, f, nil
}

// daemonClient is the HTTP client of the daemons: their CA, their server
// name, the token file.
func daemonClient(cfg DaemonsConfig) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 2
	if cfg.Dial != nil {
		tr.DialContext = cfg.Dial
	}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the daemons' CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", cfg.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: cfg.ServerName}
	}
	var rt http.RoundTripper = tr
	if cfg.TokenFile != "" {
		var err error
		if rt, err = transport.NewBearerAuthWithRefreshRoundTripper("", cfg.TokenFile, tr); err != nil {
			return nil, fmt.Errorf("the daemons' token: %w", err)
		}
	}
	// A daemon never redirects; one that does is not followed with the
	// token.
	return &http.Client{Transport: rt, Timeout: cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, nil
}

// nodeDaemon is one node's daemon, named by its node.
type nodeDaemon struct {
	exporter.Daemon
	node string
}

func (d nodeDaemon) Name() string { return d.node }

// daemons returns the daemons of the nodes (all when nodes is empty), one
// per node: the first ready (or serving) address of the node's endpoints.
// A node named but without a daemon is returned in missing.
func (s *daemonSet) daemons(nodes []string) (ds []exporter.Daemon, missing []string, err error) {
	list, err := s.slices.List(labels.Everything())
	if err != nil {
		return nil, nil, err
	}
	byNode := map[string]string{}
	for _, sl := range list {
		port, ok := slicePort(sl, s.cfg.Port)
		if !ok {
			continue
		}
		for _, ep := range sl.Endpoints {
			if ep.NodeName == nil || len(ep.Addresses) == 0 || !usable(ep.Conditions) {
				continue
			}
			if _, seen := byNode[*ep.NodeName]; !seen {
				byNode[*ep.NodeName] = net.JoinHostPort(ep.Addresses[0], strconv.Itoa(port))
			}
		}
	}
	if len(nodes) == 0 {
		for n := range byNode {
			nodes = append(nodes, n)
		}
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		addr, ok := byNode[n]
		if !ok {
			missing = append(missing, n)
			continue
		}
		ds = append(ds, nodeDaemon{Daemon: exporter.URLDaemon(s.scheme+"://"+addr, s.client), node: n})
	}
	return ds, missing, nil
}

// usable: an endpoint that is ready, or still serving while it terminates
// (a daemon keeps answering until it exits). No conditions means ready.
func usable(c discoveryv1.EndpointConditions) bool {
	return c.Ready == nil || *c.Ready || (c.Serving != nil && *c.Serving)
}

// slicePort is the slice's port named name (the first without a name).
func slicePort(sl *discoveryv1.EndpointSlice, name string) (int, bool) {
	for _, p := range sl.Ports {
		if p.Port != nil && (name == "" || (p.Name != nil && *p.Name == name)) {
			return int(*p.Port), true
		}
	}
	return 0, false
}

// waitSynced waits for the first list of the slices.
func (s *daemonSet) waitSynced(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), s.synced)
}
