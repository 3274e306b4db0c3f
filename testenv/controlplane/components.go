package controlplane

import (
	"cmp"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
)

// freePort asks the kernel for a free loopback port. Another process may take
// it before the component binds; components then fail fast and Start reports it.
var freePort = pickFreePort

func pickFreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (cp *ControlPlane) run(name string, args ...string) error {
	p, err := startProcess(cp.log, cp.Dir, name, filepath.Join(cp.BinDir, name), args)
	if err != nil {
		return err
	}
	cp.procs = append(cp.procs, p)
	return nil
}

func (cp *ControlPlane) startEtcd() (string, error) {
	client, err := freePort()
	if err != nil {
		return "", err
	}
	peer, err := freePort()
	if err != nil {
		return "", err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(client)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
	return clientURL, cp.run("etcd",
		"--name", "default", "--data-dir", filepath.Join(cp.Dir, "etcd"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL, "--unsafe-no-fsync", "--log-level", "warn")
}

func (cp *ControlPlane) startAPIServer(c *credentials, etcdURL string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	cp.URL = "https://127.0.0.1:" + strconv.Itoa(port)
	cp.apiArgs = []string{
		"--etcd-servers", etcdURL, "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port), "--cert-dir", filepath.Join(cp.Dir, "apiserver-certs"),
		"--tls-cert-file", c.ServingCert, "--tls-private-key-file", c.ServingKey,
		"--client-ca-file", c.CACert, "--token-auth-file", c.TokenFile,
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", c.SAPub, "--service-account-signing-key-file", c.SAKey,
		"--service-cluster-ip-range", serviceCIDR, "--authorization-mode", cmp.Or(cp.authz, "AlwaysAllow"),
		"--endpoint-reconciler-type", "none", "--enable-priority-and-fairness=false",
		// TaintNodesByCondition taints every new Node not-ready; the
		// node-lifecycle controller that would lift the taint does not run.
		"--disable-admission-plugins", "TaintNodesByCondition",
		// lifecycle.stopSignal (KEP-4960) is alpha in v1.37; the node agent
		// honours it like containerd, so the API server keeps the field
		// unless Config.DisableContainerStopSignals turns the gate off.
		"--feature-gates", cp.gates,
		// The front proxy as kubeadm configures it: the aggregator
		// authenticates to aggregated API servers with this client
		// certificate and names the user in these headers.
		"--requestheader-client-ca-file", c.FrontProxyCA, "--requestheader-allowed-names", FrontProxyClient,
		"--requestheader-username-headers", "X-Remote-User",
		"--requestheader-group-headers", "X-Remote-Group", "--requestheader-extra-headers-prefix", "X-Remote-Extra-",
		"--proxy-client-cert-file", c.ProxyClientCert, "--proxy-client-key-file", c.ProxyClientKey,
		"--watch-cache=true", "--profiling=false"}
	return cp.run(apiServer, cp.apiArgs...)
}

func (cp *ControlPlane) startControllers(c *credentials) error {
	err := cp.run("kube-controller-manager",
		"--kubeconfig", cp.Kubeconfig, "--controllers", Controllers, "--leader-elect=false",
		"--secure-port", "0", "--service-account-private-key-file", c.SAKey,
		"--root-ca-file", c.CACert, "--use-service-account-credentials=false",
		"--endpointslice-updates-batch-period", "0s", "--concurrent-deployment-syncs", "5")
	if err != nil {
		return err
	}
	return cp.run("kube-scheduler", "--kubeconfig", cp.Kubeconfig, "--leader-elect=false", "--secure-port", "0")
}
