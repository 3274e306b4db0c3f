package kubeproxy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes the node's kubeconfig: the API server through the
// relay on the node namespace's loopback (the serving certificate names
// 127.0.0.1), the control plane's CA, and the admin token impersonating the
// node, so kube-proxy acts as system:node:<name> in the API's eyes.
func writeKubeconfig(cfg Config) (string, error) {
	ca := cfg.Rest.TLSClientConfig.CAData
	if len(ca) == 0 && cfg.Rest.TLSClientConfig.CAFile != "" {
		b, err := os.ReadFile(cfg.Rest.TLSClientConfig.CAFile)
		if err != nil {
			return "", fmt.Errorf("kube-proxy %s: reading the API server's CA: %w", cfg.Node, err)
		}
		ca = b
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["testenv"] = &clientcmdapi.Cluster{Server: fmt.Sprintf("https://127.0.0.1:%d", RelayPort), CertificateAuthorityData: ca}
	kc.AuthInfos["node"] = &clientcmdapi.AuthInfo{Token: cfg.Rest.BearerToken,
		Impersonate: "system:node:" + cfg.Node, ImpersonateGroups: []string{"system:nodes", "system:authenticated"}}
	kc.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "node"}
	kc.CurrentContext = "testenv"
	path := filepath.Join(cfg.Dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", fmt.Errorf("kube-proxy %s: writing kubeconfig: %w", cfg.Node, err)
	}
	return path, nil
}

// writeConfig writes kube-proxy's --config file (KubeProxyConfiguration
// v1alpha1). Conntrack limits and timeouts are 0, "leave as is": those
// sysctls are global to the machine (nf_conntrack_max) or not ours to tune.
func writeConfig(cfg Config, kubeconfig string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n")
	fmt.Fprintf(&b, "mode: %s\nhostnameOverride: %s\n", cfg.Mode, cfg.Node)
	fmt.Fprintf(&b, "clientConnection:\n  kubeconfig: %s\n  qps: 50\n  burst: 100\n", kubeconfig)
	fmt.Fprintf(&b, "healthzBindAddress: 127.0.0.1:%d\nmetricsBindAddress: 127.0.0.1:%d\n", HealthzPort, MetricsPort)
	if cfg.ClusterCIDR != "" {
		fmt.Fprintf(&b, "detectLocalMode: ClusterCIDR\nclusterCIDR: %s\n", cfg.ClusterCIDR)
	}
	fmt.Fprintf(&b, "%s:\n  minSyncPeriod: %s\n  syncPeriod: %s\n", cfg.Mode, cfg.MinSync, cfg.Sync)
	b.WriteString("conntrack:\n  maxPerCore: 0\n  min: 0\n  tcpEstablishedTimeout: 0s\n  tcpCloseWaitTimeout: 0s\n")
	b.WriteString("oomScoreAdj: 0\nconfigSyncPeriod: 0s\n")
	path := filepath.Join(cfg.Dir, "config.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("kube-proxy %s: writing config: %w", cfg.Node, err)
	}
	return path, nil
}
