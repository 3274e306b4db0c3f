package e2e_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/daemon"
	"github.com/drainwatch/drainwatch/exporter/apiserver"
	"github.com/drainwatch/drainwatch/exporter/apiserver/v1alpha1"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/gobuild"
	"github.com/drainwatch/drainwatch/testenv/netlab"
	"github.com/drainwatch/drainwatch/testenv/privileged"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// The names the chart gives the daemons' Service and the API server's.
const (
	apiNamespace   = "drainwatch"
	daemonsService = "drainwatch-metrics"
	apiService     = "drainwatch-api"
)

// TestAggregatedAPI serves the daemons' records through the real API
// server as drainwatch.io/v1alpha1, the way the chart deploys it: a
// control plane with RBAC and the front proxy configured as kubeadm does,
// two nodes whose daemons run with --auth=kubernetes over TLS (a CA of the
// test's), drainwatch-apiserver with its own ServiceAccount (the chart's
// RBAC: auth-delegator, the extension-apiserver-authentication reader, the
// daemons' EndpointSlices, get/list on terminations for the daemons'
// checks) and a token bound to the daemons' audience, registered by an
// APIService whose Service points at it. A rollout of 2 naive pods behind
// a lagging router makes refusals. Then:
//
//   - a user bound to the terminations viewer role in the rollout's
//     namespace lists exactly the daemons' terminations and startups of
//     it, with the daemons' counts (the refusals equal the router's), and
//     gets one by name; kubectl (the real one) prints the table;
//   - the same user is refused (403) in another namespace and across all
//     namespaces, by the API and by kubectl;
//   - a label selector on the node asks that node only;
//   - drainwatch rollout, as that user through the API, sums exactly the
//     daemons' records (and the router's refusals) over 2 revisions, and
//     is refused in the other namespace;
//   - with one daemon stopped, the list names its node as unanswered, in
//     the list and in a warning (kubectl prints it), and still holds the
//     other node's records.
func TestAggregatedAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no control plane")
	}
	privileged.RequireRoot(t)
	if _, err := controlplane.BinDir(); err != nil {
		privileged.RequireFile(t, "control-plane binaries", err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Config{Authorization: "RBAC", Dir: t.TempDir(),
		Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	c := cluster.StartT(t, cluster.Options{Nodes: 2, ControlPlane: cp, NodePrefix: unique("e2a") + "-", Dir: t.TempDir(),
		Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})

	dir := t.TempDir()
	pki := newTestPKI(t, dir)
	daemonCert, daemonKey := pki.serving(t, "daemon", daemonsService+"."+apiNamespace+".svc")
	apiCert, apiKey := pki.serving(t, "api", apiService+"."+apiNamespace+".svc")

	cs := c.Client
	must(t, errOf(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: apiNamespace}}, metav1.CreateOptions{})))
	must(t, errOf(cs.CoreV1().Services(apiNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: daemonsService},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
			Ports: []corev1.ServicePort{{Name: "metrics", Port: 9090}}},
	}, metav1.CreateOptions{})))

	// The daemons listen in a network namespace of the test's, each on an
	// address of its own (10.250.0.N, as a hostNetwork daemon on its node's
	// address; the API rejects loopback endpoints), with an EndpointSlice
	// each; the server dials into that namespace.
	daemonNet, err := netlab.New("e2a-daemons")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = daemonNet.Close() })
	ds := make([]*nodeDaemon, len(c.NodeNames))
	for i, node := range c.NodeNames {
		addr := fmt.Sprintf("10.250.0.%d", i+1)
		if err := daemonNet.IP("addr add " + addr + "/32 dev lo"); err != nil {
			t.Fatal(err)
		}
		l, err := daemonNet.Listen("tcp", addr+":0")
		if err != nil {
			t.Fatal(err)
		}
		ds[i] = startDaemonWith(t, c.RestConfig, node, t.TempDir(), "", func(cfg *daemon.Config) {
			cfg.Listener, cfg.Auth, cfg.TLSCertFile, cfg.TLSKeyFile = l, daemon.AuthKubernetes, daemonCert, daemonKey
		})
		port := int32(l.Addr().(*net.TCPAddr).Port)
		must(t, errOf(cs.DiscoveryV1().EndpointSlices(apiNamespace).Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: daemonsService + "-" + node, Labels: map[string]string{discoveryv1.LabelServiceName: daemonsService}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{addr}, NodeName: ptr.To(node),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("metrics"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
		}, metav1.CreateOptions{})))
	}

	// The server's ServiceAccount with the chart's RBAC, its kubeconfig
	// (a token for the API server) and its token for the daemons.
	sa := "drainwatch-apiserver"
	must(t, errOf(cs.CoreV1().ServiceAccounts(apiNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})))
	applyAPIServerRBAC(ctx, t, cs, sa)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(t, c.RestConfig, serviceAccountTokenFor(ctx, t, cs, sa, ""), kubeconfig)
	tokenFile := filepath.Join(dir, "daemons-token")
	if err := os.WriteFile(tokenFile, []byte(serviceAccountTokenFor(ctx, t, cs, sa, daemon.TokenAudience)), 0o600); err != nil {
		t.Fatal(err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := apiserver.NewOptions()
	o.SecureServing.Listener, o.SecureServing.BindPort = l, l.Addr().(*net.TCPAddr).Port
	o.SecureServing.ServerCert.CertKey.CertFile, o.SecureServing.ServerCert.CertKey.KeyFile = apiCert, apiKey
	o.Kubeconfig = kubeconfig
	o.Daemons = apiserver.DaemonsConfig{Namespace: apiNamespace, Service: daemonsService, Port: "metrics",
		CAFile: pki.caFile, TokenFile: tokenFile, Timeout: 10 * time.Second, Dial: daemonNet.DialContext}
	srv, err := apiserver.New(o)
	if err != nil {
		t.Fatal(err)
	}
	sctx, stopServer := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Run(sctx) }()
	t.Cleanup(func() {
		stopServer()
		if err := <-served; err != nil {
			t.Errorf("drainwatch-apiserver: %v", err)
		}
	})
	registerAPIService(ctx, t, c, l.Addr().(*net.TCPAddr).Port, pki.caPEM)

	// The rollout.
	for _, d := range ds {
		if err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) { return d.Ready() == nil, nil }); err != nil {
			t.Fatalf("the daemon of %s never listed its node's pods: %v", d.node, err)
		}
	}
	ns, other := unique("e2e-api"), unique("e2e-api-other")
	must(t, errOf(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{})))
	dep := cluster.ServerDeployment(ns, "web", workload.ModeNaive, 2)
	dep.Spec.Strategy = oneAtATime()
	first := deploy(ctx, t, c, ns, dep)
	waitWatching(ctx, t, ds, first)
	refused := map[string]int{}
	var leader *nodeDaemon
	for _, d := range ds {
		if d.node == first[0].Spec.NodeName {
			leader = d
		}
	}
	second := otlpRollout(ctx, t, c, leader, ns, first, true, refused)
	want := map[string]correlate.Termination{} // by pod UID
	for _, p := range first {
		want[string(p.UID)] = waitComplete(ctx, t, daemonOf(t, ds, &p), string(p.UID))
	}
	wantStartups := map[string]bool{}
	for _, p := range append(slices.Clone(first), second...) {
		wantStartups[string(waitStartup(ctx, t, daemonOf(t, ds, &p), string(p.UID)).PodUID)] = true
	}

	// A user allowed in ns only.
	viewer := "drainwatch-terminations-viewer"
	must(t, errOf(cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: viewer},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupName}, Resources: []string{"terminations", "startups"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{})))
	must(t, errOf(cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-terminations"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: viewer},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "alice"}},
	}, metav1.CreateOptions{})))
	// The API server's RBAC authorizer reads bindings from an informer: a
	// binding just created can be unseen for a moment, and the aggregated
	// API would then answer alice 403. Wait until the API server itself
	// allows her, as a user's kubectl would after a retry.
	waitAllowed(ctx, t, cs, "alice", ns, "terminations")
	alice := rest.CopyConfig(c.RestConfig)
	alice.Impersonate = rest.ImpersonationConfig{UserName: "alice", Groups: []string{"system:authenticated"}}
	aliceClient, err := kubernetes.NewForConfig(alice)
	if err != nil {
		t.Fatal(err)
	}
	rc := aliceClient.CoreV1().RESTClient()
	base := "/apis/" + v1alpha1.SchemeGroupVersion.String()

	var terms v1alpha1.TerminationList
	getJSON(ctx, t, rc, base+"/namespaces/"+ns+"/terminations", nil, &terms)
	if len(terms.Items) != len(want) || len(terms.Unanswered) != 0 {
		t.Fatalf("alice's list in %s: %d terminations, unanswered %v; want %d, none unanswered", ns, len(terms.Items), terms.Unanswered, len(want))
	}
	for _, item := range terms.Items {
		w, ok := want[item.Record.PodUID]
		if !ok {
			t.Errorf("termination %s of pod uid %s is not one of the rollout's old pods", item.Name, item.Record.PodUID)
			continue
		}
		if item.Record.Counts != w.Counts || item.Record.Node != w.Node || item.Namespace != ns {
			t.Errorf("%s: counts %+v on %s in %s; the daemon's: %+v on %s", item.Name, item.Record.Counts, item.Record.Node,
				item.Namespace, w.Counts, w.Node)
		}
		if got := item.Record.Counts.RefusedAfterSigterm + item.Record.Counts.RefusedBeforeSigterm; got != refused[item.Record.PodUID] {
			t.Errorf("%s: refused %d, the router refused %d", item.Name, got, refused[item.Record.PodUID])
		}
		if item.Labels[v1alpha1.LabelWorkload] != "web" || item.Labels[v1alpha1.LabelNode] != w.Node {
			t.Errorf("%s: labels %v", item.Name, item.Labels)
		}
	}
	totalRefused := 0
	for _, n := range refused {
		totalRefused += n
	}
	if totalRefused == 0 {
		t.Error("the router saw no refusal: the rollout tested nothing")
	}

	var one v1alpha1.Termination
	getJSON(ctx, t, rc, base+"/namespaces/"+ns+"/terminations/"+terms.Items[0].Name, nil, &one)
	if one.Record.PodUID != terms.Items[0].Record.PodUID || one.Record.Counts != terms.Items[0].Record.Counts {
		t.Errorf("get %s: pod uid %s counts %+v; the list's: %s %+v", one.Name, one.Record.PodUID, one.Record.Counts,
			terms.Items[0].Record.PodUID, terms.Items[0].Record.Counts)
	}

	var starts v1alpha1.StartupList
	getJSON(ctx, t, rc, base+"/namespaces/"+ns+"/startups", nil, &starts)
	gotStartups := map[string]bool{}
	for _, s := range starts.Items {
		gotStartups[s.Record.PodUID] = true
	}
	if len(starts.Items) != len(wantStartups) || !mapsEqual(gotStartups, wantStartups) {
		t.Errorf("alice's startups in %s: %v; want the 4 pods' %v", ns, gotStartups, wantStartups)
	}

	// A node's label asks that node's daemon only.
	node := first[0].Spec.NodeName
	var onNode v1alpha1.TerminationList
	getJSON(ctx, t, rc, base+"/namespaces/"+ns+"/terminations", map[string]string{"labelSelector": v1alpha1.LabelNode + "=" + node}, &onNode)
	wantOnNode := 0
	for _, w := range want {
		if w.Node == node {
			wantOnNode++
		}
	}
	if len(onNode.Items) != wantOnNode {
		t.Errorf("terminations on %s: %d, want %d", node, len(onNode.Items), wantOnNode)
	}

	// Refused elsewhere.
	for _, path := range []string{base + "/namespaces/" + other + "/terminations", base + "/terminations", base + "/namespaces/" + other + "/startups"} {
		if code := statusOf(ctx, rc, path); code != 403 {
			t.Errorf("alice GET %s: %d, want 403", path, code)
		}
	}

	// kubectl, the real one.
	out, err := c.Kubectl(ctx, "--as", "alice", "--as-group", "system:authenticated", "-n", ns, "get", "terminations")
	if err != nil {
		t.Fatalf("kubectl get terminations -n %s as alice: %v\n%s", ns, err, out)
	}
	for _, item := range terms.Items {
		if !strings.Contains(string(out), item.Name) {
			t.Errorf("kubectl get terminations lacks %s:\n%s", item.Name, out)
		}
	}
	if !strings.Contains(string(out), "REFUSED") {
		t.Errorf("kubectl printed no table of the server's columns:\n%s", out)
	}
	if out, err := c.Kubectl(ctx, "--as", "alice", "--as-group", "system:authenticated", "-n", other, "get", "terminations"); err == nil ||
		!strings.Contains(string(out), "Forbidden") && !strings.Contains(string(out), "forbidden") {
		t.Errorf("kubectl get terminations -n %s as alice: %v, want forbidden:\n%s", other, err, out)
	}

	// drainwatch rollout through the API, as alice: the totals are the
	// daemons' records', the revisions the old pods' and the new pods'.
	bin, err := gobuild.Main(ctx, "./cmd/drainwatch", t.TempDir(), "drainwatch")
	if err != nil {
		t.Fatal(err)
	}
	aliceKubeconfig := filepath.Join(dir, "alice-kubeconfig")
	writeImpersonatingKubeconfig(t, c.RestConfig, "alice", aliceKubeconfig)
	cmd := exec.CommandContext(ctx, bin, "rollout", "deployment/web", "-n", ns, "-o", "json", "--kubeconfig", aliceKubeconfig, "--via", "api")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("drainwatch rollout as alice: %v\n%s", err, stderr.String())
	}
	var report struct {
		Terminations int `json:"terminations"`
		Startups     int `json:"startups"`
		Revisions    []struct {
			Revision                string `json:"revision"`
			Terminations, Startups  int
			RefusedAfterSigterm     int `json:"refused_after_sigterm"`
			RefusedBeforeSigterm    int `json:"refused_before_sigterm"`
			RequestsKilledBySigkill int `json:"requests_killed_by_sigkill"`
		} `json:"revisions"`
		Nodes []string `json:"nodes"`
		Pods  []struct {
			Pod  string `json:"pod"`
			UID  string `json:"pod_uid"`
			Side string `json:"side"`
		} `json:"pods"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("drainwatch rollout -o json: %v\n%s", err, out)
	}
	// One by one: each old pod once as gone, each new pod once as came.
	gone, came := map[string]string{}, map[string]bool{}
	for _, p := range report.Pods {
		switch {
		case p.Side == "gone" && gone[p.UID] == "":
			gone[p.UID] = p.Pod
		case p.Side == "came" && !came[p.UID]:
			came[p.UID] = true
		default:
			t.Errorf("drainwatch rollout: pod %s (%s) twice, or side %q", p.Pod, p.UID, p.Side)
		}
	}
	for uid := range want {
		if gone[uid] == "" {
			t.Errorf("drainwatch rollout: old pod %s not listed as gone", uid)
		}
	}
	for uid := range wantStartups {
		if !came[uid] {
			t.Errorf("drainwatch rollout: new pod %s not listed as came", uid)
		}
	}
	if len(gone) != len(want) || len(came) != len(wantStartups) {
		t.Errorf("drainwatch rollout lists %d gone and %d came, want %d and %d", len(gone), len(came), len(want), len(wantStartups))
	}
	// -o html through the API, as alice: one page with each old pod's
	// timeline.
	page, err := exec.CommandContext(ctx, bin, "rollout", "deployment/web", "-n", ns, "-o", "html", "--kubeconfig", aliceKubeconfig, "--via", "api").Output()
	if err != nil {
		t.Fatalf("drainwatch rollout -o html as alice: %v", err)
	}
	for _, name := range gone {
		if !strings.Contains(string(page), fmt.Sprintf(`aria-label="timeline of %s/%s"`, ns, name)) {
			t.Errorf("drainwatch rollout -o html has no timeline of %s", name)
		}
	}
	if n := strings.Count(string(page), "<svg"); n != len(want) {
		t.Errorf("drainwatch rollout -o html: %d timelines, want %d", n, len(want))
	}
	wantRefused, wantKilled := 0, 0
	for _, w := range want {
		wantRefused += w.Counts.RefusedAfterSigterm + w.Counts.RefusedBeforeSigterm
		wantKilled += w.Counts.RequestsKilledBySigkill
	}
	gotRefused, gotKilled, gotTerms, gotStarts := 0, 0, 0, 0
	for _, r := range report.Revisions {
		gotRefused += r.RefusedAfterSigterm + r.RefusedBeforeSigterm
		gotKilled += r.RequestsKilledBySigkill
		gotTerms += r.Terminations
		gotStarts += r.Startups
	}
	if report.Terminations != len(want) || gotTerms != len(want) || report.Startups != len(wantStartups) || gotStarts != len(wantStartups) ||
		gotRefused != wantRefused || gotRefused != totalRefused || gotKilled != wantKilled || len(report.Revisions) != 2 {
		t.Errorf("drainwatch rollout: %d terminations (%d by revision), %d startups (%d), refused %d, killed %d, %d revisions; "+
			"want %d, %d startups, refused %d (the router's %d), killed %d, 2 revisions:\n%s",
			report.Terminations, gotTerms, report.Startups, gotStarts, gotRefused, gotKilled, len(report.Revisions),
			len(want), len(wantStartups), wantRefused, totalRefused, wantKilled, out)
	}
	if text, err := exec.CommandContext(ctx, bin, "rollout", "deployment/web", "-n", ns, "--kubeconfig", aliceKubeconfig).CombinedOutput(); err != nil {
		t.Errorf("drainwatch rollout (text): %v\n%s", err, text)
	} else {
		t.Logf("drainwatch rollout deployment/web -n %s (as alice, through the API):\n%s", ns, text)
	}
	cmd = exec.CommandContext(ctx, bin, "rollout", "deployment/web", "-n", other, "--kubeconfig", aliceKubeconfig, "--via", "api")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(strings.ToLower(string(out)), "forbidden") {
		t.Errorf("drainwatch rollout -n %s as alice: %v, want forbidden:\n%s", other, err, out)
	}

	// One daemon down: named, the other's records still listed.
	var down *nodeDaemon
	for _, d := range ds {
		if d.node != node {
			down = d
		}
	}
	down.stop()
	res := rc.Get().AbsPath(base + "/namespaces/" + ns + "/terminations").Do(ctx)
	body, err := res.Raw()
	if err != nil {
		t.Fatalf("the list with %s's daemon down: %v: %s", down.node, err, body)
	}
	var partial v1alpha1.TerminationList
	if err := json.Unmarshal(body, &partial); err != nil {
		t.Fatal(err)
	}
	if len(partial.Unanswered) != 1 || partial.Unanswered[0].Node != down.node || len(partial.Items) != wantOnNode {
		t.Errorf("with %s's daemon down: %d terminations, unanswered %v; want %d and %s named", down.node,
			len(partial.Items), partial.Unanswered, wantOnNode, down.node)
	}
	if !slices.ContainsFunc(res.Warnings(), func(w utilnet.WarningHeader) bool { return strings.Contains(w.Text, down.node) }) {
		t.Errorf("no warning names %s: %v", down.node, res.Warnings())
	}
}

// applyAPIServerRBAC gives sa what the chart gives drainwatch-apiserver.
func applyAPIServerRBAC(ctx context.Context, t *testing.T, cs kubernetes.Interface, sa string) {
	t.Helper()
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: apiNamespace}}
	role := func(name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
	}
	must(t, errOf(cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa + ":auth-delegator"}, RoleRef: role("system:auth-delegator"), Subjects: subject,
	}, metav1.CreateOptions{})))
	must(t, errOf(cs.RbacV1().RoleBindings("kube-system").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa + ":auth-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
		Subjects:   subject,
	}, metav1.CreateOptions{})))
	must(t, errOf(cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: sa},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupName}, Resources: []string{"terminations"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{})))
	must(t, errOf(cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa}, RoleRef: role(sa), Subjects: subject,
	}, metav1.CreateOptions{})))
	must(t, errOf(cs.RbacV1().Roles(apiNamespace).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: sa},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{discoveryv1.GroupName}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})))
	must(t, errOf(cs.RbacV1().RoleBindings(apiNamespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa}, Subjects: subject,
	}, metav1.CreateOptions{})))
}

// registerAPIService points drainwatch.io/v1alpha1 at the server on
// localhost:port (an ExternalName Service: the API server runs in the
// root network namespace, where the server listens) and waits until the
// aggregator reports it Available.
func registerAPIService(ctx context.Context, t *testing.T, c *cluster.Cluster, port int, caPEM []byte) {
	t.Helper()
	must(t, errOf(c.Client.CoreV1().Services(apiNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: apiService},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}, metav1.CreateOptions{})))
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": v1alpha1.SchemeGroupVersion.Version + "." + v1alpha1.GroupName},
		"spec": map[string]any{
			"group": v1alpha1.GroupName, "version": v1alpha1.SchemeGroupVersion.Version,
			"service":  map[string]any{"namespace": apiNamespace, "name": apiService, "port": int64(port)},
			"caBundle": base64.StdEncoding.EncodeToString(caPEM), "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
		},
	}}
	if err := c.Apply(ctx, svc); err != nil {
		t.Fatal(err)
	}
	var last []byte
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		out, err := c.Kubectl(ctx, "get", "apiservice", v1alpha1.SchemeGroupVersion.Version+"."+v1alpha1.GroupName,
			"-o", `jsonpath={.status.conditions[?(@.type=="Available")].status} {.status.conditions[?(@.type=="Available")].message}`)
		last = out
		return err == nil && strings.HasPrefix(string(out), "True"), nil
	})
	if err != nil {
		t.Fatalf("the APIService never became available: %s", last)
	}
}

// serviceAccountTokenFor is a token of the ServiceAccount for audience
// (empty: the API server's).
func serviceAccountTokenFor(ctx context.Context, t *testing.T, cs kubernetes.Interface, sa, audience string) string {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	tr, err := cs.CoreV1().ServiceAccounts(apiNamespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// writeKubeconfig writes a kubeconfig of the API server of rc with token.
func writeKubeconfig(t *testing.T, rc *rest.Config, token, path string) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData, CertificateAuthority: rc.CAFile}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}

// writeImpersonatingKubeconfig writes a kubeconfig of rc's API server and
// credentials that acts as user (a member of system:authenticated).
func writeImpersonatingKubeconfig(t *testing.T, rc *rest.Config, user, path string) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData, CertificateAuthority: rc.CAFile}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: rc.BearerToken, ClientCertificateData: rc.CertData, ClientKeyData: rc.KeyData,
		Impersonate: user, ImpersonateGroups: []string{"system:authenticated"}}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}

// getJSON GETs path with params and decodes the answer into v.
func getJSON(ctx context.Context, t *testing.T, rc rest.Interface, path string, params map[string]string, v any) {
	t.Helper()
	req := rc.Get().AbsPath(path)
	for k, val := range params {
		req = req.Param(k, val)
	}
	body, err := req.DoRaw(ctx)
	if err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("decoding GET %s: %v", path, err)
	}
}

// statusOf is the status code of GET path.
func statusOf(ctx context.Context, rc rest.Interface, path string) int {
	var code int
	rc.Get().AbsPath(path).Do(ctx).StatusCode(&code)
	return code
}

// errOf is the error of a call that returns an object too.
func errOf[T any](_ T, err error) error { return err }

func mapsEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// testPKI is a CA of the test's and the serving certificates it signs.
type testPKI struct {
	dir    string
	key    *ecdsa.PrivateKey
	cert   *x509.Certificate
	caFile string
	caPEM  []byte
}

func newTestPKI(t *testing.T, dir string) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "drainwatch-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{dir: dir, key: key, cert: cert, caFile: filepath.Join(dir, "ca.crt"),
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	if err := os.WriteFile(p.caFile, p.caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// serving writes a serving pair for dnsName as name.crt and name.key.
func (p *testPKI) serving(t *testing.T, name, dnsName string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// waitAllowed waits (at most 30 s) until the API server's authorizer lets
// user list resource of drainwatch.io in namespace.
func waitAllowed(ctx context.Context, t *testing.T, cs kubernetes.Interface, user, namespace, resource string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   user,
				Groups: []string{"system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: namespace, Verb: "list", Group: v1alpha1.GroupName, Resource: resource,
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = r.Status.Reason
		return r.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("%s is still not allowed to list %s in %s after 30 s: %s", user, resource, namespace, last)
	}
}
