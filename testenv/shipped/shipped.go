// Package shipped puts on a testenv control plane what the chart's shipped
// values (deploy/helm/drainwatch/values-recommended.yaml: the defaults and
// the PodMonitor) install for serving and scraping the daemons, for daemons
// that run as processes beside it (the lab, the tests): the generated TLS
// Secret, the RBAC, the scraper's ServiceAccount and token Secret, applied
// to the API server as rendered; the DaemonSet's --auth and --tls-* flags
// with the Secret's files; and Prometheus' configuration as the Prometheus
// Operator generates it from the chart's PodMonitor, with the Secrets it
// references read from the API server (testenv/opconfig).
package shipped

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/drainwatch/drainwatch/daemon"
	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/gotools"
)

// Namespace and Release are the chart's release as the README installs it.
const (
	Namespace = "drainwatch"
	Release   = "drainwatch"
)

// Install is what the shipped values installed.
type Install struct {
	Dir string
	// DaemonArgs are the DaemonSet's --auth and --tls-* flags, the
	// certificate's files in Dir/tls instead of the pod's mount.
	DaemonArgs []string
	// CAFile holds the CA the PodMonitor verifies the daemons with, for
	// the name ServerName.
	CAFile, ServerName string
	// ScraperToken is the scraper ServiceAccount's token (its token
	// Secret's: the API server's audience), what Prometheus presents.
	ScraperToken string
	objects      map[string]*unstructured.Unstructured
	cp           *controlplane.ControlPlane
}

// Apply renders the chart with the shipped values (and set, --set
// arguments such as podMonitor.interval=1s) into dir, applies its TLS
// Secret, RBAC and scraper objects to cp, and waits for the scraper's
// token. The DaemonSet, Service and NetworkPolicy are not applied: the
// daemons run beside the control plane, not as its pods.
func Apply(ctx context.Context, cp *controlplane.ControlPlane, dir string, set ...string) (*Install, error) {
	objs, err := render(ctx, dir, set)
	if err != nil {
		return nil, err
	}
	in := &Install{Dir: dir, objects: objs, cp: cp}
	if err := in.apply(ctx); err != nil {
		return nil, err
	}
	if err := in.writeTLS(); err != nil {
		return nil, err
	}
	if err := in.daemonArgs(); err != nil {
		return nil, err
	}
	return in, in.waitScraperToken(ctx)
}

// render runs helm template with the shipped values.
func render(ctx context.Context, dir string, set []string) (map[string]*unstructured.Unstructured, error) {
	helm, err := gotools.Path("helm-"+gotools.HelmVersion, "helm", "make helm")
	if err != nil {
		return nil, err
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		return nil, err
	}
	chart := filepath.Join(root, "deploy/helm/drainwatch")
	args := []string{"template", Release, chart, "--namespace", Namespace, "--values", filepath.Join(chart, "values-recommended.yaml")}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := exec.CommandContext(ctx, helm, args...).Output()
	if err != nil {
		return nil, fmt.Errorf("helm %s: %w", strings.Join(args, " "), err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "rendered.yaml"), out, 0o600); err != nil {
		return nil, err
	}
	return parse(out)
}

// parse splits a rendering into objects keyed "Kind/name".
func parse(data []byte) (map[string]*unstructured.Unstructured, error) {
	objs := map[string]*unstructured.Unstructured{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("parsing the chart's rendering: %w", err)
		}
		if m != nil {
			u := &unstructured.Unstructured{Object: m}
			objs[u.GetKind()+"/"+u.GetName()] = u
		}
	}
}

// applied are the kinds Apply sends to the API server.
var applied = map[string]bool{"Secret": true, "ServiceAccount": true, "ClusterRole": true, "ClusterRoleBinding": true}

func (in *Install) apply(ctx context.Context) error {
	_, err := in.cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the namespace %s: %w", Namespace, err)
	}
	// In an order kubectl applies as the file gives it: ServiceAccounts
	// before the rest. The token controller deletes a token Secret whose
	// ServiceAccount does not exist yet (the map's order made the lab's
	// scraper token never appear, now and then).
	keys := slices.Sorted(maps.Keys(in.objects))
	slices.SortStableFunc(keys, func(a, b string) int {
		return cmp.Compare(applyRank(in.objects[a].GetKind()), applyRank(in.objects[b].GetKind()))
	})
	var b bytes.Buffer
	for _, k := range keys {
		if o := in.objects[k]; applied[o.GetKind()] {
			data, err := o.MarshalJSON()
			if err != nil {
				return err
			}
			b.Write(data)
			b.WriteString("\n")
		}
	}
	file := filepath.Join(in.Dir, "applied.json")
	if err := os.WriteFile(file, b.Bytes(), 0o600); err != nil {
		return err
	}
	_, err = in.cp.Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f", file)
	return err
}

// applyRank orders kinds for apply: what others refer to first.
func applyRank(kind string) int {
	switch kind {
	case "ServiceAccount":
		return 0
	case "ClusterRole", "Role":
		return 1
	case "ClusterRoleBinding", "RoleBinding":
		return 2
	default:
		return 3
	}
}

// secretData is a rendered Secret's key, decoded.
func (in *Install) secretData(name, key string) ([]byte, error) {
	s := in.objects["Secret/"+name]
	if s == nil {
		return nil, fmt.Errorf("the chart rendered no Secret %s", name)
	}
	v, _, _ := unstructured.NestedString(s.Object, "data", key)
	data, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(data) == 0 {
		return nil, fmt.Errorf("Secret %s key %s: %q (%v)", name, key, v, err)
	}
	return data, nil
}

// writeTLS writes the serving Secret the DaemonSet mounts into Dir/tls, and
// the CA the PodMonitor names.
func (in *Install) writeTLS() error {
	secret, _, err := in.tlsMount()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(in.Dir, "tls"), 0o700); err != nil {
		return err
	}
	for _, key := range []string{"tls.crt", "tls.key", "ca.crt"} {
		data, err := in.secretData(secret, key)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(in.Dir, "tls", key), data, 0o600); err != nil {
			return err
		}
	}
	ep, err := in.endpoint()
	if err != nil {
		return err
	}
	ca, _, _ := unstructured.NestedStringMap(ep, "tlsConfig", "ca", "secret")
	in.ServerName, _, _ = unstructured.NestedString(ep, "tlsConfig", "serverName")
	if ca["name"] != secret || ca["key"] != "ca.crt" || in.ServerName == "" {
		return fmt.Errorf("the PodMonitor's tlsConfig %v does not verify the Secret %s the daemons serve", ep["tlsConfig"], secret)
	}
	in.CAFile = filepath.Join(in.Dir, "tls", "ca.crt")
	return nil
}

// endpoint is the PodMonitor's one endpoint.
func (in *Install) endpoint() (map[string]any, error) {
	pm := in.objects["PodMonitor/"+Release]
	if pm == nil {
		return nil, errors.New("the shipped values render no PodMonitor")
	}
	eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if len(eps) != 1 {
		return nil, fmt.Errorf("PodMonitor endpoints %v, want one", eps)
	}
	return eps[0].(map[string]any), nil
}

// container is the DaemonSet's container and pod spec.
func (in *Install) container() (map[string]any, map[string]any, error) {
	ds := in.objects["DaemonSet/"+Release]
	if ds == nil {
		return nil, nil, errors.New("no DaemonSet rendered")
	}
	pod, _, _ := unstructured.NestedMap(ds.Object, "spec", "template", "spec")
	cs, _ := pod["containers"].([]any)
	if len(cs) != 1 {
		return nil, nil, fmt.Errorf("DaemonSet containers %v, want one", cs)
	}
	return cs[0].(map[string]any), pod, nil
}

// tlsMount is the Secret of the DaemonSet's volume tls and where it is mounted.
func (in *Install) tlsMount() (secret, mount string, err error) {
	c, pod, err := in.container()
	if err != nil {
		return "", "", err
	}
	vols, _ := pod["volumes"].([]any)
	for _, v := range vols {
		if name, _, _ := unstructured.NestedString(v.(map[string]any), "name"); name == "tls" {
			secret, _, _ = unstructured.NestedString(v.(map[string]any), "secret", "secretName")
		}
	}
	mounts, _ := c["volumeMounts"].([]any)
	for _, m := range mounts {
		if name, _, _ := unstructured.NestedString(m.(map[string]any), "name"); name == "tls" {
			mount, _, _ = unstructured.NestedString(m.(map[string]any), "mountPath")
		}
	}
	if secret == "" || mount == "" {
		return "", "", errors.New("the shipped DaemonSet mounts no serving certificate (volume tls)")
	}
	return secret, mount, nil
}

// daemonArgs are the DaemonSet's serving flags, the mount replaced by Dir/tls.
func (in *Install) daemonArgs() error {
	c, _, err := in.container()
	if err != nil {
		return err
	}
	_, mount, err := in.tlsMount()
	if err != nil {
		return err
	}
	args, _ := c["args"].([]any)
	for _, a := range args {
		s, _ := a.(string)
		if strings.HasPrefix(s, "--auth") || strings.HasPrefix(s, "--tls-") {
			in.DaemonArgs = append(in.DaemonArgs, strings.Replace(s, mount+"/", filepath.Join(in.Dir, "tls")+"/", 1))
		}
	}
	return nil
}

// waitScraperToken waits for the token controller to fill the scraper's
// token Secret (the PodMonitor's authorization.credentials).
func (in *Install) waitScraperToken(ctx context.Context) error {
	ep, err := in.endpoint()
	if err != nil {
		return err
	}
	cred, _, _ := unstructured.NestedStringMap(ep, "authorization", "credentials")
	if cred["name"] == "" {
		return fmt.Errorf("the PodMonitor presents no token: %v", ep)
	}
	// kube-controller-manager's token controller fills the Secret; on a
	// busy machine (a lab beside make test) it took over 30 s once.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := in.cp.Client.CoreV1().Secrets(Namespace).Get(ctx, cred["name"], metav1.GetOptions{})
		if err == nil && len(s.Data[cred["key"]]) > 0 {
			in.ScraperToken = string(s.Data[cred["key"]])
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the scraper's token Secret %s/%s was not filled by kube-controller-manager's token controller within 2 min: %w", Namespace, cred["name"], err)
	}
	return nil
}

// Client is an HTTPS client that verifies the daemons as the PodMonitor
// does (CAFile, ServerName) and sends token, when set, as a bearer token.
func (in *Install) Client(token string) (*http.Client, error) {
	pem, err := os.ReadFile(in.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", in.CAFile)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: in.ServerName, MinVersion: tls.VersionTLS12}}
	var rt http.RoundTripper = tr
	if token != "" {
		rt = bearer{token: token, next: tr}
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: rt}, nil
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// ReaderToken creates the ServiceAccount name in the release's namespace,
// binds it to the chart's terminations and metrics reader ClusterRoles, and
// returns a token bound to the drainwatch audience: what a user of
// `drainwatch timeline --url` gets from kubectl create token NAME
// --audience drainwatch.
func (in *Install) ReaderToken(ctx context.Context, name string) (string, error) {
	cs := in.cp.Client
	_, err := cs.CoreV1().ServiceAccounts(Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating the ServiceAccount %s: %w", name, err)
	}
	for _, role := range []string{Release + "-terminations-reader", Release + "-metrics-reader"} {
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + role},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: Namespace}}}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("binding %s to %s: %w", name, role, err)
		}
	}
	exp := int64(4 * 3600)
	tok, err := cs.CoreV1().ServiceAccounts(Namespace).CreateToken(ctx, name, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{Audiences: []string{daemon.TokenAudience}, ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("a token of %s for the audience %s: %w", name, daemon.TokenAudience, err)
	}
	return tok.Status.Token, nil
}
