package main

import (
	"context"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/privileged"
	"github.com/rs/zerolog"
)

// TestDoctorRBACDenied: against a real API server, a ServiceAccount bound
// to the manifest's ClusterRole minus "patch events" gets every rbac line
// ok except events, which fails naming patch and the fix.
func TestDoctorRBACDenied(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no control plane")
	}
	if _, err := controlplane.BinDir(); err != nil {
		privileged.RequireFile(t, "control-plane binaries", err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Config{Authorization: "RBAC", Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	role := manifestRole(t)
	role.Name = "drainwatch-minus-patch"
	for i, r := range role.Rules {
		if r.Resources[0] == "events" {
			role.Rules[i].Verbs = []string{"list", "watch", "create"}
		}
	}
	cs := cp.Client
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(cs.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}))
	must(cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "dw-doctor"}}, metav1.CreateOptions{}))
	must(cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "dw-doctor"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "dw-doctor", Namespace: "default"}},
	}, metav1.CreateOptions{}))
	tok, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "dw-doctor", &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: cp.RestConfig.Host, BearerToken: tok.Status.Token, TLSClientConfig: rest.TLSClientConfig{
		CAData: cp.RestConfig.TLSClientConfig.CAData, CAFile: cp.RestConfig.TLSClientConfig.CAFile}}
	rs := checkKube(func() (*rest.Config, string, error) { return cfg, "test token", nil })
	var lines strings.Builder
	writeResults(&lines, "text", rs)
	t.Logf("\n%s", lines.String())
	if len(rs) != 1+len(neededAccess) || rs[0].Status != checkOK {
		t.Fatalf("%d lines, api %+v", len(rs), rs[0])
	}
	for _, r := range rs[1:] {
		want := checkOK
		if r.Check == "rbac events" {
			want = checkFail
			if r.Detail != "denied: patch (needs list,watch,create,patch)" || !strings.Contains(r.Fix, "grant patch on events") {
				t.Errorf("events line %+v", r)
			}
		}
		if r.Status != want {
			t.Errorf("%s: %s, want %s (%s)", r.Check, r.Status, want, r.Detail)
		}
	}
}
