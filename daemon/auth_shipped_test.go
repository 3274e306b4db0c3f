package daemon_test

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/drainwatch/drainwatch/daemon"
	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/privileged"
	"github.com/drainwatch/drainwatch/testenv/promtest"
	"github.com/drainwatch/drainwatch/testenv/shipped"
)

// TestShippedDefaultsRefuseUnauthenticated: a daemon started with the
// serving flags of the chart's shipped values and of the kustomize base
// (their DaemonSet's args, the chart's generated certificate), against a
// real API server with RBAC, refuses a read without a token (401), a token
// for the API server's audience on the API and /ui (401), and serves
// /metrics to the PodMonitor's scraper token and to a Prometheus
// ServiceAccount's own token (the API server's audience) bound to the
// metrics reader, and the API to a token bound to the drainwatch audience.
func TestShippedDefaultsRefuseUnauthenticated(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no control plane")
	}
	bin, err := controlplane.BinDir()
	if err != nil {
		privileged.RequireFile(t, "control-plane binaries", err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Config{Authorization: "RBAC", Log: testLogger(t)})
	must(t, err)
	defer cp.Stop()
	in, err := shipped.Apply(ctx, cp, t.TempDir())
	must(t, err)
	reader, err := in.ReaderToken(ctx, "dw-timeline-user")
	must(t, err)
	// The same user's token for the API server's own audience: what a
	// kubeconfig holds.
	tr, err := cp.Client.CoreV1().ServiceAccounts(shipped.Namespace).CreateToken(ctx, "dw-timeline-user", &authnv1.TokenRequest{}, metav1.CreateOptions{})
	must(t, err)
	readerAPIServer := tr.Status.Token
	prometheus := serviceAccountTokenBound(ctx, t, cp, "prometheus-k8s", shipped.Release+"-metrics-reader")

	base := baseArgs(t, filepath.Join(bin, "kubectl"), in)
	for name, args := range map[string][]string{"chart": in.DaemonArgs, "base": base} {
		t.Run(name, func(t *testing.T) {
			cfg := servingConfig(t, args)
			l, err := net.Listen("tcp", "127.0.0.1:0")
			must(t, err)
			cfg.NodeName, cfg.Rest, cfg.StateDir, cfg.CgroupRoot, cfg.ProcRoot = uniqueNode("shipped"), cp.RestConfig, t.TempDir(), t.TempDir(), t.TempDir()
			cfg.Log, cfg.OpenKernel, cfg.Listener, cfg.NoEvents = testLogger(t), newFakeKernel(false).open, l, true
			startDaemon(t, cfg)
			url := "https://" + l.Addr().String()
			must(t, wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true,
				func(context.Context) (bool, error) { return shippedGet(t, in, url+"/readyz", "") == 200, nil }))
			for _, c := range []struct {
				path, who, token string
				want             int
			}{
				{"/metrics", "no token", "", 401},
				{"/api/v1/terminations", "no token", "", 401},
				{"/ui", "no token", "", 401},
				{"/metrics", "the PodMonitor's scraper", in.ScraperToken, 200},
				{"/metrics", "Prometheus' own ServiceAccount", prometheus, 200},
				{"/api/v1/terminations", "the scraper (API server audience)", in.ScraperToken, 401},
				{"/api/v1/terminations", "a reader, API server audience", readerAPIServer, 401},
				{"/ui", "a reader, API server audience", readerAPIServer, 401},
				{"/api/v1/terminations", "a reader, drainwatch audience", reader, 200},
				{"/ui", "a reader, drainwatch audience", reader, 200},
				{"/api/v1/terminations", "Prometheus (not a reader), API server audience", prometheus, 401},
			} {
				if got := shippedGet(t, in, url+c.path, c.token); got != c.want {
					t.Errorf("GET %s as %s: %d, want %d", c.path, c.who, got, c.want)
				}
			}
			if name == "chart" {
				scrapeAsOperator(ctx, t, in, cfg.NodeName, l.Addr().String())
			}
		})
	}
}

// scrapeAsOperator runs Debian's Prometheus with the operator's
// configuration for the chart's PodMonitor (its CA, serverName and the
// scraper's token) and waits for its scrape of the daemon: up 1, the
// daemon's own series labelled with its node.
func scrapeAsOperator(ctx context.Context, t *testing.T, in *shipped.Install, node, addr string) {
	t.Helper()
	config, err := in.PrometheusConfig(ctx, []shipped.Target{{Node: node, Addr: addr}}, nil)
	must(t, err)
	prom, err := promtest.Launch(ctx, promtest.Options{Dir: filepath.Join(t.TempDir(), "prometheus"), Config: config})
	must(t, err)
	t.Cleanup(prom.Stop)
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got, err := prom.QueryWhen(qctx, `up{job="drainwatch/drainwatch"}`, func(s []promtest.Sample) bool { return len(s) == 1 && s[0].Value == 1 })
	if err != nil {
		log, _ := os.ReadFile(prom.LogFile)
		t.Fatalf("Prometheus with the operator's configuration never scraped the daemon: %v\nconfig:\n%s\nlog:\n%s", err, config, log)
	}
	build, err := prom.Query(ctx, "drainwatch_build_info")
	must(t, err)
	if len(build) != 1 || build[0].Labels["node"] != node {
		t.Errorf("drainwatch_build_info %v, want one series with node=%s", build, node)
	}
	t.Logf("scraped over TLS with the scraper's token: %v", got[0].Labels)
}

// servingConfig turns a DaemonSet's serving flags into the daemon's
// Config; a flag it does not know fails the test, so that a new one in the
// manifests is checked here too.
func servingConfig(t *testing.T, args []string) daemon.Config {
	t.Helper()
	var cfg daemon.Config
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "--auth":
			cfg.Auth = v
		case "--tls-cert-file":
			cfg.TLSCertFile = v
		case "--tls-key-file":
			cfg.TLSKeyFile = v
		case "--tls-self-signed":
			cfg.TLSSelfSigned = v == "" || v == "true"
		default:
			t.Fatalf("serving flag %q not handled", a)
		}
	}
	if cfg.Auth != daemon.AuthKubernetes || cfg.TLSCertFile == "" {
		t.Fatalf("shipped serving flags %v: want --auth=kubernetes and a certificate", args)
	}
	return cfg
}

// baseArgs are the kustomize base's DaemonSet serving flags, its Secret's
// mount read from the chart's generated certificate (the same Secret name
// and mount: the base takes it from cert-manager or the chart).
func baseArgs(t *testing.T, kubectl string, in *shipped.Install) []string {
	t.Helper()
	out, err := exec.Command(kubectl, "kustomize", "../deploy/daemonset/base").Output()
	must(t, err)
	var ds appsv1.DaemonSet
	for _, doc := range strings.Split(string(out), "\n---\n") {
		if strings.Contains(doc, "kind: DaemonSet") {
			must(t, yaml.Unmarshal([]byte(doc), &ds))
		}
	}
	c := ds.Spec.Template.Spec.Containers
	if len(c) != 1 {
		t.Fatalf("the base's DaemonSet: %d containers", len(c))
	}
	var args []string
	for _, a := range c[0].Args {
		if strings.HasPrefix(a, "--auth") || strings.HasPrefix(a, "--tls-") {
			args = append(args, strings.Replace(a, "/etc/drainwatch/tls/", filepath.Join(in.Dir, "tls")+"/", 1))
		}
	}
	return args
}

// shippedGet GETs url as the PodMonitor verifies the daemon (the chart's CA
// and serverName), with token.
func shippedGet(t *testing.T, in *shipped.Install, url, token string) int {
	t.Helper()
	c, err := in.Client(token)
	must(t, err)
	resp, err := c.Get(url)
	must(t, err)
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	must(t, err)
	return resp.StatusCode
}

// serviceAccountTokenBound is a token for the API server's audience of a
// new ServiceAccount in monitoring, bound to role.
func serviceAccountTokenBound(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, name, role string) string {
	t.Helper()
	_, err := cp.Kubectl(ctx, "create", "namespace", "monitoring")
	must(t, err)
	_, err = cp.Kubectl(ctx, "-n", "monitoring", "create", "serviceaccount", name)
	must(t, err)
	_, err = cp.Kubectl(ctx, "create", "clusterrolebinding", name, "--clusterrole", role, "--serviceaccount", "monitoring:"+name)
	must(t, err)
	out, err := cp.Kubectl(ctx, "-n", "monitoring", "create", "token", name)
	must(t, err)
	return strings.TrimSpace(string(out))
}
