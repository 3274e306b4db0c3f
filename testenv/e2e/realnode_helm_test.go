package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/drainwatch/drainwatch/collector/kernel"
	"github.com/drainwatch/drainwatch/daemon"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/gotools"
	"github.com/drainwatch/drainwatch/testenv/lab"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// imageTag is the tag `make image` is run with for the chart test.
const imageTag = "realnode-test"

// TestRealNodeHelmInstall: drainwatch installed the way users install it.
// `make image`'s script builds the image, `ctr images import` puts it into
// the real node's containerd, `helm install` applies the chart to the API
// server (image.tag set to it, a state dir and pin path of the test's own),
// the scheduler places the DaemonSet's pod on the real node and the real
// kubelet starts it with the chart's security context. Then one naive pod
// is deleted under the seeds' clients, and the daemon's numbers are read as
// Prometheus reads them: /metrics of each address in the Service's
// EndpointSlices, from the fabric.
func TestRealNodeHelmInstall(t *testing.T) {
	e := startRealNode(t, "e2rh")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	archive := makeImage(ctx, t)
	if out, err := e.node.Ctr(ctx, "images", "import", "--all-platforms", archive); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	release := unique("drainwatch")
	e.helmInstall(ctx, t, release)
	dwPod, startErr := e.waitDaemonPod(ctx, t, release)
	if lacking := lackingCapabilities(t); startErr != "" && len(lacking) > 0 {
		// This machine's root lacks a capability the chart adds: runc
		// cannot grant it to any container here. The one difference from
		// the chart: that capability is left out (testenv/runtime does the
		// same), everything else is the chart's.
		t.Logf("the chart's pod as rendered: %s; this machine's bounding set lacks %v: leaving it out with the chart's capabilities value",
			startErr, lacking)
		e.dropCapabilities(ctx, t, release, lacking, dwPod.UID)
		if dwPod, startErr = e.waitDaemonPod(ctx, t, release); startErr != "" {
			t.Fatalf("DaemonSet pod without %v: %s", lacking, startErr)
		}
	}
	if startErr != "" {
		t.Fatalf("DaemonSet pod: %s", startErr)
	}
	sc := dwPod.Spec.Containers[0].SecurityContext
	t.Logf("DaemonSet pod %s Ready on %s (%s), runAsUser %d, capabilities %v", dwPod.Name, dwPod.Spec.NodeName, dwPod.Status.PodIP,
		*sc.RunAsUser, sc.Capabilities.Add)
	if slices.Contains(sc.Capabilities.Add, "SYS_PTRACE") {
		t.Errorf("the daemon runs with SYS_PTRACE, which the chart does not add")
	}
	metrics := e.metricsURL(ctx, t, release, release+"-metrics") // the chart's headless Service
	// The chart's defaults: TLS with its generated certificate, and
	// --auth=kubernetes: a scrape without a token is refused, one with a
	// metrics reader's token (as Prometheus' own) is served.
	anonymous, reader := e.metricsClient(ctx, t, release, false), e.metricsClient(ctx, t, release, true)
	if code := getStatus(ctx, t, anonymous, metrics); code != http.StatusUnauthorized {
		t.Errorf("GET %s without a token: %d, want 401 (the chart's default --auth=kubernetes)", metrics, code)
	}

	ns := unique("e2e-rn-helm")
	dep := cluster.ServerDeployment(ns, "web", workload.ModeNaive, 1)
	e.onRealNode(dep)
	pods := deploy(ctx, t, e.c, ns, dep)
	victim := &pods[0]
	ino, err := e.node.PodNetns(string(victim.UID))
	if err != nil {
		t.Fatal(err)
	}
	waitNetnsWatched(ctx, t, daemon.NodePinPath(pinPath(release), e.node.Name), victim.Name, ino)
	addr := cluster.PodAddr(victim, cluster.ServerPort)
	res, err := client.Seeds{Dial: e.c.Dial, Target: addr, Pod: addr, Window: 3 * time.Second,
		Stop: func(ctx context.Context) error { return e.c.DeletePod(ctx, ns, victim.Name) }}.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := lab.RefusedTo(addr, res.Work, res.Readiness, []client.Request{res.Slow})
	probes, err := e.node.ProbeRefusals(ns+"/"+victim.Name, res.StopAt)
	if err != nil {
		t.Fatal(err)
	}
	got := e.waitScraped(ctx, t, reader, metrics, ns)
	t.Logf("clients: work %s ready %s slow %s, refused %d; kubelet's probes refused %d; /metrics: %+v",
		client.Summarize(res.Work), client.Summarize(res.Readiness), res.Slow.Outcome, want, probes, got)
	// The real kubelet tears the pod's sandbox down within the clients'
	// window: requests after that time out (the pod's address is gone), and
	// how many come before it depends on the machine's load (7 with an
	// hour-long soak beside the test, at least 10 on a quiet machine).
	// The seeds' tens are the seeds tests' to reproduce; here the count
	// must be the clients' and not 0.
	if got != (scraped{terminations: 1, refused: want, probes: probes}) || want == 0 {
		t.Errorf("scraped %+v, want 1 termination, %d refused after the stop signal (not 0), %d probes refused, nothing killed",
			got, want, probes)
	}
}

// makeImage runs `make image`'s script for amd64 into a directory of the
// test and returns the OCI archive (ghcr.io/drainwatch/drainwatch:imageTag).
func makeImage(ctx context.Context, t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, "bash", "tools/scripts/image.sh", dir, imageTag, "amd64")
	cmd.Dir = moduleRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	return filepath.Join(dir, "drainwatch-oci.tar")
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// helmInstall installs deploy/helm/drainwatch as release into a namespace
// of the same name, on the real node only, with the test's own state dir
// and pin path (the daemon unpins on exit); uninstalled at the end.
func (e *realNodeEnv) helmInstall(ctx context.Context, t *testing.T, release string) {
	t.Helper()
	helm := gotools.Helm(t)
	state := filepath.Join(t.TempDir(), "state")
	pin := pinPath(release)
	args := []string{"--kubeconfig", e.c.Kubeconfig, "--namespace", release}
	out, err := exec.CommandContext(ctx, helm, append([]string{"install", release, filepath.Join(moduleRoot(t), "deploy/helm/drainwatch"),
		"--create-namespace", "--set", "image.tag=" + imageTag, "--set", "stateDir=" + state, "--set", "pinPath=" + pin,
		"--set", "unpinOnExit=true", "--set", `nodeSelector.kubernetes\.io/hostname=` + e.node.Name}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, helm, append([]string{"uninstall", release, "--wait"}, args...)...).CombinedOutput(); err != nil {
			t.Errorf("helm uninstall: %v\n%s", err, out)
		}
		if err := kernel.RemovePins(pin); err != nil {
			t.Error(err)
		}
	})
}

// pinPath is the release's --pin-path: its own, not the default.
func pinPath(release string) string { return "/sys/fs/bpf/" + release }

// waitDaemonPod waits for the DaemonSet's pod to be Ready, or for the
// runtime to fail starting its container (the kubelet's message).
func (e *realNodeEnv) waitDaemonPod(ctx context.Context, t *testing.T, release string) (*corev1.Pod, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	var last string
	for {
		list, err := e.c.Client.CoreV1().Pods(release).List(ctx, metav1.ListOptions{})
		if err == nil && len(list.Items) == 1 && list.Items[0].DeletionTimestamp == nil {
			p := &list.Items[0]
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Ready {
					return p, ""
				}
				if tm := cs.LastTerminationState.Terminated; tm != nil && tm.Reason == "StartError" {
					return p, fmt.Sprintf("%s (exit %d): %s", tm.Reason, tm.ExitCode, tm.Message)
				}
				if w := cs.State.Waiting; w != nil && w.Message != "" {
					last = w.Reason + ": " + w.Message
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("DaemonSet pod of %s not Ready: %v; last container state: %s", release, ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// capabilityBits names the bits of the capabilities a chart may add.
var capabilityBits = map[string]int{"BPF": unix.CAP_BPF, "PERFMON": unix.CAP_PERFMON,
	"SYS_RESOURCE": unix.CAP_SYS_RESOURCE, "SYS_PTRACE": unix.CAP_SYS_PTRACE}

// chartCapabilities are the capabilities the chart adds (values.yaml's
// capabilities), by bit: the chart's own list, so that a capability it
// no longer adds is not added back here.
func chartCapabilities(t *testing.T) map[string]int {
	t.Helper()
	var values struct {
		Capabilities []string `json:"capabilities"`
	}
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "deploy/helm/drainwatch/values.yaml"))
	if err == nil {
		err = yaml.Unmarshal(b, &values)
	}
	if err != nil {
		t.Fatal(err)
	}
	caps := map[string]int{}
	for _, c := range values.Capabilities {
		bit, ok := capabilityBits[c]
		if !ok {
			t.Fatalf("values.yaml adds %s: no bit known for it here", c)
		}
		caps[c] = bit
	}
	return caps
}

// lackingCapabilities are those of chartCapabilities this process's
// bounding set lacks (this machine: SYS_RESOURCE).
func lackingCapabilities(t *testing.T) []string {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var bnd uint64
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			if bnd, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64); err != nil {
				t.Fatal(err)
			}
		}
	}
	var lacking []string
	for name, bit := range chartCapabilities(t) {
		if bnd&(1<<bit) == 0 {
			lacking = append(lacking, name)
		}
	}
	slices.Sort(lacking)
	return lacking
}

// dropCapabilities removes caps from the DaemonSet's capabilities.add and
// waits for the old pod to go.
func (e *realNodeEnv) dropCapabilities(ctx context.Context, t *testing.T, release string, caps []string, old types.UID) {
	t.Helper()
	// What a user of such a node does: the chart's capabilities value
	// without them.
	var keep []string
	for name := range chartCapabilities(t) {
		if !slices.Contains(caps, name) {
			keep = append(keep, name)
		}
	}
	slices.Sort(keep)
	list, _ := json.Marshal(keep)
	out, err := exec.CommandContext(ctx, gotools.Helm(t), "upgrade", release, filepath.Join(moduleRoot(t), "deploy/helm/drainwatch"),
		"--reuse-values", "--set-json", "capabilities="+string(list),
		"--kubeconfig", e.c.Kubeconfig, "--namespace", release).CombinedOutput()
	if err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := e.c.Client.CoreV1().Pods(release).List(ctx, metav1.ListOptions{})
		return err == nil && !slices.ContainsFunc(list.Items, func(p corev1.Pod) bool { return p.UID == old }), nil
	})
	if err != nil {
		t.Fatalf("the DaemonSet's first pod is not gone after the upgrade: %v", err)
	}
}

// metricsURL is what Prometheus's endpoints discovery finds for the
// Service: its EndpointSlice's one ready address, port metrics.
func (e *realNodeEnv) metricsURL(ctx context.Context, t *testing.T, ns, service string) string {
	t.Helper()
	for {
		slices, err := e.c.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=" + service})
		if err == nil && len(slices.Items) == 1 {
			s := slices.Items[0]
			if len(s.Endpoints) == 1 && len(s.Ports) == 1 && s.Endpoints[0].Conditions.Ready != nil && *s.Endpoints[0].Conditions.Ready {
				return fmt.Sprintf("https://%s:%d/metrics", s.Endpoints[0].Addresses[0], *s.Ports[0].Port)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no ready endpoint in the Service %s/%s: %v", ns, service, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// scraped are the daemon's counters for one namespace.
type scraped struct{ terminations, refused, killed, probes int }

// scrape reads url from the fabric, as Prometheus would, and sums the
// namespace's series.
func (e *realNodeEnv) scrape(ctx context.Context, c *http.Client, url, ns string) (scraped, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return scraped{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return scraped{}, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return scraped{}, fmt.Errorf("parsing %s: %w", url, err)
	}
	var s scraped
	for name, field := range map[string]*int{"drainwatch_terminations_total": &s.terminations,
		"drainwatch_connections_refused_after_sigterm_total": &s.refused,
		"drainwatch_requests_killed_by_sigkill_total":        &s.killed,
		"drainwatch_probe_connections_refused_total":         &s.probes} {
		for _, m := range mfs[name].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "namespace" && l.GetValue() == ns {
					*field += int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return s, nil
}

// waitScraped scrapes url until the namespace's termination is counted
// (drainwatch_terminations_total counts complete terminations).
func (e *realNodeEnv) waitScraped(ctx context.Context, t *testing.T, c *http.Client, url, ns string) scraped {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	var last scraped
	var err error
	for {
		if last, err = e.scrape(ctx, c, url, ns); err == nil && last.terminations > 0 {
			return last
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: no termination of %s counted: %v (last %+v, %v)", url, ns, ctx.Err(), last, err)
		case <-time.After(time.Second):
		}
	}
}
