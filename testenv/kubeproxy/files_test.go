package kubeproxy

import (
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func TestConfigFile(t *testing.T) {
	cfg := Config{Mode: NFTables, Node: "node-1", Dir: t.TempDir(), ClusterCIDR: "10.244.0.0/16", MinSync: time.Second}
	if err := cfg.validate(); err == nil {
		t.Fatal("a config without NS, Rest and BinDir validated")
	}
	cfg.Sync = 0
	path, err := writeConfig(cfg, "/x/kubeconfig")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mode: nftables\n", "hostnameOverride: node-1\n", "  kubeconfig: /x/kubeconfig\n",
		"healthzBindAddress: 127.0.0.1:10256\n", "metricsBindAddress: 127.0.0.1:10249\n", "clusterCIDR: 10.244.0.0/16\n",
		"nftables:\n  minSyncPeriod: 1s\n", "  maxPerCore: 0\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("config lacks %q:\n%s", want, b)
		}
	}
}

func TestKubeconfigImpersonatesTheNode(t *testing.T) {
	cfg := Config{Node: "node-2", Dir: t.TempDir(),
		Rest: &rest.Config{Host: "https://127.0.0.1:1234", BearerToken: "tok", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}}
	path, err := writeKubeconfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ai, cl := kc.AuthInfos["node"], kc.Clusters["testenv"]
	if ai.Impersonate != "system:node:node-2" || ai.Token != "tok" || cl.Server != "https://127.0.0.1:6443" || string(cl.CertificateAuthorityData) != "ca" {
		t.Errorf("kubeconfig: user %+v cluster %+v", ai, cl)
	}
}
