package daemonset_test

import (
	"bytes"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TestBaseSecureByDefault: the base serves TLS from the Secret
// drainwatch-tls with --auth=kubernetes (probes over HTTPS), and its
// NetworkPolicy admits the namespace monitoring, not every source.
func TestBaseSecureByDefault(t *testing.T) {
	objs := loadBase(t)
	ds := objs["DaemonSet"][0].(*appsv1.DaemonSet)
	c := ds.Spec.Template.Spec.Containers[0]
	for _, a := range []string{"--auth=kubernetes", "--tls-cert-file=/etc/drainwatch/tls/tls.crt", "--tls-key-file=/etc/drainwatch/tls/tls.key"} {
		if !slices.Contains(c.Args, a) {
			t.Errorf("args %v lack %s", c.Args, a)
		}
	}
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			t.Errorf("%s probe scheme %q, want HTTPS", name, p.HTTPGet.Scheme)
		}
	}
	if i := slices.IndexFunc(ds.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "tls" }); i < 0 ||
		ds.Spec.Template.Spec.Volumes[i].Secret == nil || ds.Spec.Template.Spec.Volumes[i].Secret.SecretName != "drainwatch-tls" {
		t.Errorf("no volume tls from the Secret drainwatch-tls: %+v", ds.Spec.Template.Spec.Volumes)
	}
	np := objs["NetworkPolicy"][0].(*networkingv1.NetworkPolicy)
	want := []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
		"kubernetes.io/metadata.name": "monitoring"}}}}
	if len(np.Spec.Ingress) != 1 || !equalYAML(t, np.Spec.Ingress[0].From, want) {
		t.Errorf("NetworkPolicy ingress %+v, want from the namespace monitoring only", np.Spec.Ingress)
	}
}

// TestCertManagerOverlayIssuesTheBaseSecret: the overlay's Certificate
// writes the Secret the DaemonSet mounts, for the name the PodMonitor
// verifies.
func TestCertManagerOverlayIssuesTheBaseSecret(t *testing.T) {
	var cert struct {
		Kind string `json:"kind"`
		Spec struct {
			SecretName string   `json:"secretName"`
			DNSNames   []string `json:"dnsNames"`
		} `json:"spec"`
	}
	readYAML(t, "overlays/cert-manager/certificate.yaml", &cert)
	var pm struct {
		Spec struct {
			PodMetricsEndpoints []struct {
				Scheme    string `json:"scheme"`
				TLSConfig struct {
					CA struct {
						Secret struct{ Name, Key string } `json:"secret"`
					} `json:"ca"`
					ServerName string `json:"serverName"`
				} `json:"tlsConfig"`
			} `json:"podMetricsEndpoints"`
		} `json:"spec"`
	}
	readYAML(t, "overlays/prometheus-operator/podmonitor.yaml", &pm)
	ep := pm.Spec.PodMetricsEndpoints[0]
	if cert.Kind != "Certificate" || cert.Spec.SecretName != "drainwatch-tls" || ep.Scheme != "https" ||
		ep.TLSConfig.CA.Secret.Name != cert.Spec.SecretName || ep.TLSConfig.CA.Secret.Key != "ca.crt" ||
		!slices.Contains(cert.Spec.DNSNames, ep.TLSConfig.ServerName) {
		t.Errorf("Certificate %+v and PodMonitor endpoint %+v: the PodMonitor must verify the Certificate's Secret and name", cert, ep)
	}
}

func equalYAML(t *testing.T, a, b any) bool {
	t.Helper()
	ya, err := yaml.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	yb, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ya, yb)
}
