package helm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
	"github.com/drainwatch/drainwatch/testenv/gotools"
	"github.com/drainwatch/drainwatch/testenv/promtest"
)

// metricsText is what a daemon exports for a termination in namespace shop
// (the pod it measured, not its own).
const metricsText = `# HELP drainwatch_connections_refused_after_sigterm_total Connections refused after the stop signal.
# TYPE drainwatch_connections_refused_after_sigterm_total counter
drainwatch_connections_refused_after_sigterm_total{namespace="shop",pod="web-7d9c-x2",revision="7",workload="web",workload_kind="Deployment"} 44
`

// TestOperatorConfigKeepsDrainwatchLabels scrapes a daemon the way the
// Prometheus Operator does: the chart's PodMonitor turned into scrape
// configuration by the operator's own generator, kubernetes_sd discovering
// the daemon's pod on a real API server, Debian's Prometheus scraping it.
// With the chart's honorLabels the series keep drainwatch's namespace; the
// same PodMonitor without it gets the target's namespace, drainwatch's
// renamed exported_namespace (the bug this guards against).
func TestOperatorConfigKeepsDrainwatchLabels(t *testing.T) {
	cp := cptest.Get(t)
	opconfig := gotools.OpConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	port := serveMetrics(t)
	createDaemonPod(ctx, t, cp.Client, port)

	dir := t.TempDir()
	// The labels alone: the opt-out values (plain HTTP, no token), since
	// the fake daemon serves neither; the lab scrapes real daemons with the
	// shipped TLS and token (testenv/shipped).
	honored := objects(t, template(t, "--set", "podMonitor.enabled=true", "--set", "podMonitor.interval=1s",
		"--set", "auth=none", "--set", "tls.generate=false"))["PodMonitor/drainwatch"]
	plain := honored.DeepCopy()
	plain.SetName("drainwatch-without-honorlabels")
	plain.Object["spec"].(map[string]any)["podMetricsEndpoints"].([]any)[0].(map[string]any)["honorLabels"] = false
	var pms bytes.Buffer
	for _, pm := range []any{honored.Object, plain.Object} {
		data, err := json.Marshal(pm)
		if err != nil {
			t.Fatal(err)
		}
		pms.WriteString("---\n")
		pms.Write(data)
		pms.WriteString("\n")
	}
	pmFile := filepath.Join(dir, "podmonitors.yaml")
	if err := os.WriteFile(pmFile, pms.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// The operator's configuration for Debian's Prometheus 2.42; its
	// kubernetes_sd_configs run in Prometheus' own discovery code (k8ssd),
	// since Debian builds Prometheus without it.
	config := run(t, opconfig, "-prometheus-version", "v2.42.0", "-scrape-interval", "1s", pmFile)
	config = runWithInput(t, config, gotools.K8sSD(t), "-kubeconfig", cp.Kubeconfig, "-dir", dir)
	prom, err := promtest.Launch(ctx, promtest.Options{Dir: filepath.Join(dir, "prometheus"), Config: config, ScrapeInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prom.Stop)
	t.Logf("the operator's configuration, discovery in file_sd:\n%s", config)

	const metric = "drainwatch_connections_refused_after_sigterm_total"
	for job, want := range map[string]map[string]string{
		"drainwatch/drainwatch": {
			"namespace": "shop", "pod": "web-7d9c-x2", "node": "node-1",
		},
		"drainwatch/drainwatch-without-honorlabels": {
			"namespace": "drainwatch", "pod": "drainwatch-x7k2p", "node": "node-1",
			"exported_namespace": "shop", "exported_pod": "web-7d9c-x2",
		},
	} {
		expr := fmt.Sprintf("%s{job=%q}", metric, job)
		samples, err := prom.QueryWhen(ctx, expr, func(s []promtest.Sample) bool { return len(s) == 1 })
		if err != nil {
			log, _ := os.ReadFile(prom.LogFile)
			t.Fatalf("%v\nPrometheus log:\n%s", err, log)
		}
		got := samples[0]
		labels := map[string]string{}
		for _, l := range []string{"namespace", "pod", "node", "exported_namespace", "exported_pod"} {
			if v, ok := got.Labels[l]; ok {
				labels[l] = v
			}
		}
		if diff := cmp.Diff(want, labels); diff != "" || got.Value != 44 {
			t.Errorf("job %s: value %v, labels (-want +got):\n%s", job, got.Value, diff)
		}
		t.Logf("job %s: %v = %v", job, got.Labels, got.Value)
	}
}

// serveMetrics serves metricsText on a free 127.0.0.1 port and returns it.
func serveMetrics(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte(metricsText))
	})
	s := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { _ = s.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// createDaemonPod creates a running drainwatch pod whose IP is loopback and
// whose metrics port is the fake daemon's: what kubernetes_sd then discovers.
func createDaemonPod(ctx context.Context, t *testing.T, c kubernetes.Interface, port int) {
	t.Helper()
	ensureNamespace(ctx, t, c)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "drainwatch-x7k2p", Namespace: namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "drainwatch"}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{
			Name: "drainwatch", Image: "drainwatch",
			Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: int32(port), Protocol: corev1.ProtocolTCP}},
		}}},
	}
	pod, err := c.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.CoreV1().Pods(namespace).Delete(context.Background(), pod.Name, *metav1.NewDeleteOptions(0))
	})
	now := metav1.Now()
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}},
		StartTime: &now, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	if _, err := c.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("marking the daemon's pod running on 127.0.0.1:%s: %v", strconv.Itoa(port), err)
	}
}

// ensureNamespace creates the release's namespace unless it exists (the
// package's tests share one control plane).
func ensureNamespace(ctx context.Context, t *testing.T, c kubernetes.Interface) {
	t.Helper()
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
