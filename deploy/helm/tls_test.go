package helm_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// checkGeneratedTLS: the chart's generated Secret holds a CA and a serving
// certificate it signed for serverName, the name the PodMonitor verifies.
func checkGeneratedTLS(t *testing.T, secret *unstructured.Unstructured, serverName string) {
	t.Helper()
	if secret == nil {
		t.Fatal("no generated Secret drainwatch-tls")
	}
	data := secret.Object["data"].(map[string]any)
	ca, cert := parseCert(t, data["ca.crt"]), parseCert(t, data["tls.crt"])
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: serverName,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the generated certificate does not verify for %s with the generated CA: %v", serverName, err)
	}
	if !ca.IsCA || secret.Object["type"] != "kubernetes.io/tls" {
		t.Errorf("CA %v (IsCA %v), type %v", ca.Subject, ca.IsCA, secret.Object["type"])
	}
}

func parseCert(t *testing.T, b64 any) *x509.Certificate {
	t.Helper()
	s, _ := b64.(string)
	der, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(der)
	if block == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSecureDefaults: the default values serve with --auth=kubernetes and
// the generated certificate, the PodMonitor (when enabled) verifies it
// with the Secret's CA and scrapes with the scraper's token, and the
// NetworkPolicy admits the namespace monitoring only.
func TestSecureDefaults(t *testing.T) {
	objs := objects(t, template(t, "--set", "podMonitor.enabled=true"))
	c := field(t, objs["DaemonSet/drainwatch"], "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
	args := c["args"].([]any)
	want := []any{"--auth=kubernetes", "--tls-cert-file=/etc/drainwatch/tls/tls.crt", "--tls-key-file=/etc/drainwatch/tls/tls.key"}
	if got := args[len(args)-3:]; !equal(got, want) {
		t.Errorf("args end %v, want %v", got, want)
	}
	ep := field(t, objs["PodMonitor/drainwatch"], "spec", "podMetricsEndpoints").([]any)[0].(map[string]any)
	wantTLS := map[string]any{"ca": map[string]any{"secret": map[string]any{"name": "drainwatch-tls", "key": "ca.crt"}},
		"serverName": "drainwatch-metrics.drainwatch.svc"}
	if ep["scheme"] != "https" || !equal(ep["tlsConfig"], wantTLS) || ep["authorization"] == nil {
		t.Errorf("PodMonitor endpoint %v: want https, tlsConfig %v and the scraper's token", ep, wantTLS)
	}
	from := field(t, objs["NetworkPolicy/drainwatch"], "spec", "ingress").([]any)[0].(map[string]any)["from"]
	wantFrom := []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{
		"kubernetes.io/metadata.name": "monitoring"}}}}
	if !equal(from, wantFrom) {
		t.Errorf("NetworkPolicy from %v, want %v", from, wantFrom)
	}
}

// TestOptOut: auth=none with tls.generate=false is plain HTTP for anyone
// (the documented opt-out), no Secret rendered.
func TestOptOut(t *testing.T) {
	objs := objects(t, template(t, "--set", "auth=none", "--set", "tls.generate=false", "--set", "networkPolicy.from=null"))
	c := field(t, objs["DaemonSet/drainwatch"], "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
	want := []any{"run", "--node-name=$(NODE_NAME)", "--listen=:9090", "--state-dir=/var/lib/drainwatch"}
	if !equal(c["args"], want) || objs["Secret/drainwatch-tls"] != nil {
		t.Errorf("opt-out: args %v (want %v), Secret %v", c["args"], want, objs["Secret/drainwatch-tls"] != nil)
	}
	if _, ok := field(t, objs["NetworkPolicy/drainwatch"], "spec", "ingress").([]any)[0].(map[string]any)["from"]; ok {
		t.Error("networkPolicy.from=null still renders a from")
	}
}

// TestCertManager: tls.certManager renders a Certificate into the Secret
// the DaemonSet mounts and the PodMonitor verifies, instead of generating.
func TestCertManager(t *testing.T) {
	objs := objects(t, template(t, "--set", "tls.certManager.enabled=true", "--set", "tls.certManager.issuerRef.kind=ClusterIssuer",
		"--set", "tls.certManager.issuerRef.name=corp-ca", "--set", "podMonitor.enabled=true"))
	cert := objs["Certificate/drainwatch"]
	if cert == nil || objs["Secret/drainwatch-tls"] != nil {
		t.Fatalf("want a Certificate and no generated Secret: %v", keys(objs))
	}
	spec := cert.Object["spec"].(map[string]any)
	if spec["secretName"] != "drainwatch-tls" || !equal(spec["issuerRef"], map[string]any{"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}) ||
		!equal(spec["dnsNames"], []any{"drainwatch-metrics.drainwatch.svc", "drainwatch-metrics.drainwatch.svc.cluster.local"}) {
		t.Errorf("Certificate spec %v", spec)
	}
}

func equal(a, b any) bool { return cmp.Equal(a, b) }
