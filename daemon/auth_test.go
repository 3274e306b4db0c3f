package daemon_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/drainwatch/drainwatch/daemon"
	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// TestProtectedEndpoints: against a real API server with RBAC, a daemon
// with --auth=kubernetes over TLS refuses a request without a token (401)
// and a ServiceAccount without a binding (403), serves one bound to the
// chart's reader ClusterRole (200) — the API and /ui only with a token bound
// to the drainwatch audience, /metrics with the API server's audience too
// (401 for the API server's audience on the API: a token the daemon could
// replay against the API server) — keeps /healthz and /readyz open, and
// serves a renewed certificate to the next connection.
func TestProtectedEndpoints(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no control plane")
	}
	if _, err := controlplane.BinDir(); err != nil {
		privileged.RequireFile(t, "control-plane binaries", err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Config{Authorization: "RBAC", Log: testLogger(t)})
	must(t, err)
	defer cp.Stop()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	firstCA := writeServingPair(t, certFile, keyFile, "first")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	startDaemon(t, daemon.Config{
		NodeName: uniqueNode("auth"), Rest: cp.RestConfig, StateDir: t.TempDir(), CgroupRoot: t.TempDir(),
		ProcRoot: t.TempDir(), Log: testLogger(t), OpenKernel: newFakeKernel(false).open, Listener: l, NoEvents: true,
		Auth: daemon.AuthKubernetes, TLSCertFile: certFile, TLSKeyFile: keyFile,
	})
	base := "https://" + l.Addr().String()
	must(t, wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return tlsGet(t, firstCA, base+"/readyz", "") == 200, nil }))

	denied := serviceAccountToken(ctx, t, cp.Client, "dw-unbound", "", daemon.TokenAudience)
	reader := serviceAccountToken(ctx, t, cp.Client, "dw-reader", "drainwatch-reader", daemon.TokenAudience)
	// The same ServiceAccount's token for the API server's own audience (a
	// TokenRequest naming none), and one for another audience.
	readerAPIServer := serviceAccountToken(ctx, t, cp.Client, "dw-reader", "", "")
	readerOther := serviceAccountToken(ctx, t, cp.Client, "dw-reader", "", "vault")
	// A role that may only list: every list (the startups too), not one
	// termination by UID.
	lister := serviceAccountToken(ctx, t, cp.Client, "dw-lister", "drainwatch-lister", daemon.TokenAudience, "list")
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/healthz", "", 200},
		{"/readyz", "", 200},
		{"/metrics", "", 401},
		{"/api/v1/terminations", "", 401},
		{"/ui", "", 401},
		{"/metrics", "not-a-token", 401},
		{"/metrics", denied, 403},
		{"/api/v1/terminations", denied, 403},
		{"/api/v1/terminations/some-uid", denied, 403},
		{"/ui", denied, 403},
		{"/metrics", reader, 200},
		{"/api/v1/terminations", reader, 200},
		{"/api/v1/terminations/some-uid", reader, 404},
		{"/ui", reader, 200},
		{"/api/v1/startups", reader, 200},
		{"/api/v1/startups", denied, 403},
		{"/api/v1/terminations", lister, 200},
		{"/api/v1/startups", lister, 200},
		{"/api/v1/terminations/some-uid", lister, 403},
		{"/metrics", readerAPIServer, 200},
		{"/api/v1/terminations", readerAPIServer, 401},
		{"/api/v1/terminations/some-uid", readerAPIServer, 401},
		{"/ui", readerAPIServer, 401},
		{"/metrics", readerOther, 401},
		{"/api/v1/terminations", readerOther, 401},
	} {
		if got := tlsGet(t, firstCA, base+c.path, c.token); got != c.want {
			t.Errorf("GET %s (token %q…): %d, want %d", c.path, prefix(c.token), got, c.want)
		}
	}

	// A renewed pair (another CA: the old one no longer verifies it).
	renewedCA := writeServingPair(t, certFile, keyFile, "renewed")
	if got := tlsGet(t, renewedCA, base+"/metrics", reader); got != 200 {
		t.Errorf("GET /metrics with the renewed certificate: %d, want 200", got)
	}
	if _, err := tlsClient(firstCA).Get(base + "/healthz"); err == nil {
		t.Error("the first certificate is still served after the renewal")
	}
}

// serviceAccountToken creates a ServiceAccount unless it exists, binds it
// to a ClusterRole that may GET the daemon's paths when role is set (with
// verbs on terminations, get and list if none), and returns a token bound
// to audience (empty: the API server's own).
func serviceAccountToken(ctx context.Context, t *testing.T, cs kubernetes.Interface, name, role, audience string, verbs ...string) string {
	t.Helper()
	if len(verbs) == 0 {
		verbs = []string{"get", "list"}
	}
	_, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		must(t, err)
	}
	if role != "" {
		_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: role},
			Rules: []rbacv1.PolicyRule{
				{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
				{APIGroups: []string{daemon.APIGroup}, Resources: []string{"terminations"}, Verbs: verbs},
			},
		}, metav1.CreateOptions{})
		must(t, err)
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: "default"}},
		}, metav1.CreateOptions{})
		must(t, err)
	}
	req := &authnv1.TokenRequest{}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	tok, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, req, metav1.CreateOptions{})
	must(t, err)
	return tok.Status.Token
}

func prefix(s string) string { return s[:min(len(s), 8)] }

func tlsClient(ca *x509.Certificate) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// tlsGet GETs url on a new connection, trusting ca only.
func tlsGet(t *testing.T, ca *x509.Certificate, url, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	must(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := tlsClient(ca).Do(req)
	must(t, err)
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	must(t, err)
	return resp.StatusCode
}

// writeServingPair writes a certificate for 127.0.0.1 signed by a new CA
// (named name) and returns the CA. The files are replaced by renames, like
// the kubelet's atomic Secret update, and stamped a second apart from any
// previous version.
func writeServingPair(t *testing.T, certFile, keyFile, name string) *x509.Certificate {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	caTmpl := certTemplate(name+" CA", 1)
	caTmpl.IsCA, caTmpl.BasicConstraintsValid, caTmpl.KeyUsage = true, true, x509.KeyUsageCertSign
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(t, err)
	ca, err := x509.ParseCertificate(caDER)
	must(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := certTemplate(name, 2)
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	must(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	stamp := time.Now().Add(time.Second)
	if fi, err := os.Stat(certFile); err == nil {
		stamp = fi.ModTime().Add(time.Second)
	}
	for file, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		must(t, os.WriteFile(file+".new", pem.EncodeToMemory(block), 0o600), os.Chtimes(file+".new", stamp, stamp),
			os.Rename(file+".new", file))
	}
	return ca
}

func certTemplate(cn string, serial int64) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
}

// TestSelfSignedTLS: without certificate files the daemon serves HTTPS
// with a certificate of its own (for 127.0.0.1), plain HTTP is refused.
func TestSelfSignedTLS(t *testing.T) {
	cp := cptest.Get(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	startDaemon(t, daemon.Config{
		NodeName: uniqueNode("selfsigned"), Rest: cp.RestConfig, StateDir: t.TempDir(), CgroupRoot: t.TempDir(),
		ProcRoot: t.TempDir(), Log: testLogger(t), OpenKernel: newFakeKernel(false).open, Listener: l, NoEvents: true,
		TLSSelfSigned: true,
	})
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get("https://" + l.Addr().String() + "/metrics")
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(resp.TLS.PeerCertificates) != 1 || !resp.TLS.PeerCertificates[0].IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("GET /metrics: %d, certificate %+v", resp.StatusCode, resp.TLS.PeerCertificates)
	}
	resp, err = http.Get("http://" + l.Addr().String() + "/metrics")
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain HTTP to the TLS port: %d, want 400 (Go's answer to HTTP on a TLS port)", resp.StatusCode)
	}
}
