package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/drainwatch/drainwatch/collector/kube"
)

// apiAccess is what the daemon does with one resource: the rules of
// deploy/daemonset/base/rbac.yaml (TestDoctorRBACMatchesManifest keeps
// them equal).
type apiAccess struct {
	group, resource string
	verbs           []string
}

var neededAccess = []apiAccess{
	{"", "pods", []string{"list", "watch"}},
	{"", "nodes", []string{"list", "watch"}},
	{"", "events", []string{"list", "watch", "create", "patch"}},
	{"", "services", []string{"list", "watch"}},
	{"discovery.k8s.io", "endpointslices", []string{"list", "watch"}},
	{"apps", "replicasets", []string{"get"}},
	{"apps", "deployments", []string{"get"}},
	{"apps", "statefulsets", []string{"get"}},
	{"apps", "daemonsets", []string{"get"}},
	{"batch", "jobs", []string{"get"}},
	{"argoproj.io", "rollouts", []string{"get"}},
	// --auth=kubernetes: the reviews that authenticate and authorize scrapers.
	{"authentication.k8s.io", "tokenreviews", []string{"create"}},
	{"authorization.k8s.io", "subjectaccessreviews", []string{"create"}},
}

// kubeConfig is the API configuration doctor checks with: the kubeconfig
// given, else the in-cluster one inside a pod, else none (nil).
func kubeConfig(path string) (*rest.Config, string, error) {
	if path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		return cfg, "kubeconfig " + path, err
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return nil, "", nil
	}
	cfg, err := rest.InClusterConfig()
	return cfg, "in-cluster config", err
}

func checkKube(load func() (*rest.Config, string, error)) []checkResult {
	cfg, source, err := load()
	switch {
	case err != nil:
		return []checkResult{{Check: "api", Status: checkFail, Detail: fmt.Sprintf("%s: %v", source, err),
			Fix: "a readable kubeconfig (--kubeconfig), or the pod's ServiceAccount token mounted (automountServiceAccountToken)"}}
	case cfg == nil:
		return []checkResult{{Check: "api", Status: checkSkip,
			Detail: "no kubeconfig and not in a pod: API access and RBAC not checked (--kubeconfig to check them)"}}
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 10 * time.Second
	cs, err := kube.NewClients(cfg)
	if err != nil {
		return []checkResult{{Check: "api", Status: checkFail, Detail: err.Error(), Fix: "a valid kubeconfig"}}
	}
	v, err := serverVersion(cs.CoreV1().RESTClient())
	if err != nil {
		return []checkResult{{Check: "api", Status: checkFail, Detail: fmt.Sprintf("%s (%s): %v", cfg.Host, source, err),
			Fix: "the API server must be reachable from the node (network policy, proxy, token)"}}
	}
	rs := []checkResult{{Check: "api", Status: checkOK, Detail: fmt.Sprintf("%s %s (%s)", cfg.Host, v.GitVersion, source)}}
	for _, a := range neededAccess {
		rs = append(rs, checkAccess(cs, a))
	}
	return rs
}

// serverVersion is GET /version, what client-go's discovery client's
// ServerVersion asks (that client is not linked: see kube.Clients).
func serverVersion(c rest.Interface) (*version.Info, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := c.Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var v version.Info
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("decoding /version: %w", err)
	}
	return &v, nil
}

// checkAccess asks the API server, one SelfSubjectAccessReview per verb,
// whether this identity may do what the daemon does with a resource.
func checkAccess(cs *kube.Clients, a apiAccess) checkResult {
	name := a.resource
	if a.group != "" {
		name += "." + a.group
	}
	r := checkResult{Check: "rbac " + name, Status: checkOK}
	var denied []string
	for _, verb := range a.verbs {
		ok, err := allowed(cs, a.group, a.resource, verb)
		if err != nil {
			r.Status, r.Detail = checkFail, fmt.Sprintf("SelfSubjectAccessReview %s %s: %v", verb, name, err)
			r.Fix = "the API server must serve authorization.k8s.io/v1 SelfSubjectAccessReview"
			return r
		}
		if !ok {
			denied = append(denied, verb)
		}
	}
	if len(denied) > 0 {
		r.Status = checkFail
		r.Detail = fmt.Sprintf("denied: %s (needs %s)", strings.Join(denied, ","), strings.Join(a.verbs, ","))
		r.Fix = fmt.Sprintf("grant %s on %s to the daemon's ServiceAccount: the ClusterRole in deploy/daemonset/base/rbac.yaml (kubectl apply -k deploy/daemonset/base)", strings.Join(denied, ","), name)
		return r
	}
	r.Detail = strings.Join(a.verbs, ",") + " allowed"
	return r
}

func allowed(cs *kube.Clients, group, resource, verb string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rev, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authv1.SelfSubjectAccessReview{
		Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authv1.ResourceAttributes{
			Group: group, Resource: resource, Verb: verb,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return rev.Status.Allowed, nil
}
