package e2e_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// metricsClient scrapes the release's daemons from the fabric as the
// chart's PodMonitor does: verifying the certificate with the CA of the
// chart's generated Secret for the metrics Service's name, and, with
// token, presenting a token for the API server's audience of a
// ServiceAccount bound to the chart's metrics reader (Prometheus' own).
func (e *realNodeEnv) metricsClient(ctx context.Context, t *testing.T, release string, token bool) *http.Client {
	t.Helper()
	secret, err := e.c.Client.CoreV1().Secrets(release).Get(ctx, release+"-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's generated TLS Secret: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(secret.Data["ca.crt"]) {
		t.Fatalf("no CA in %s-tls", release)
	}
	tr := &http.Transport{DialContext: e.c.Dial, TLSClientConfig: &tls.Config{RootCAs: pool,
		ServerName: release + "-metrics." + release + ".svc", MinVersion: tls.VersionTLS12}}
	c := &http.Client{Timeout: 5 * time.Second, Transport: tr}
	if token {
		c.Transport = bearerTransport{token: metricsReaderToken(ctx, t, e, release), next: tr}
	}
	return c
}

func metricsReaderToken(ctx context.Context, t *testing.T, e *realNodeEnv, release string) string {
	t.Helper()
	cs := e.c.Client
	if _, err := cs.CoreV1().ServiceAccounts(release).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: release + "-prometheus"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: release + "-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus", Namespace: release}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
	tok, err := cs.CoreV1().ServiceAccounts(release).CreateToken(ctx, "prometheus", &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Status.Token
}

type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// getStatus GETs url with c and returns the status code.
func getStatus(ctx context.Context, t *testing.T, c *http.Client, url string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
