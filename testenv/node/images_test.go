package node_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
	"github.com/drainwatch/drainwatch/testenv/node"
	"github.com/drainwatch/drainwatch/testenv/privileged"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nginxConf runs Debian's nginx in the foreground on :8080, logging to
// stderr (the container log) at notice, where it names the signals it gets.
const nginxConf = `daemon off;
pid %[1]s/nginx.pid;
error_log stderr notice;
events { worker_connections 64; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	server { listen 8080; location / { return 200 "ok\n"; } }
}
`

// nginxPod is a pod of image "nginx" with its config in a directory of its
// own and a 1 s httpGet readiness probe; stopSignal, when set, is the pod's
// lifecycle.stopSignal.
func (l *lab) nginxPod(t *testing.T, name string, stopSignal corev1.Signal) *corev1.Pod {
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(nginxConf, dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	grace := int64(10)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: l.ns},
		Spec: corev1.PodSpec{NodeName: l.agent.Name(), TerminationGracePeriodSeconds: &grace,
			OS: &corev1.PodOS{Name: corev1.Linux},
			Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.22",
				Args:           []string{"-e", "stderr", "-p", dir, "-c", conf},
				ReadinessProbe: httpProbe(8080, "/"),
			}}},
	}
	if stopSignal != "" {
		pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{StopSignal: &stopSignal}
	}
	return pod
}

// nginxRun is what one nginx pod's deletion showed.
type nginxRun struct {
	signal   string // the signal nginx logged it received
	term     node.Termination
	statuses map[string]int // status stopSignal values seen while running ("" = unset)
	spec     string         // lifecycle.stopSignal as the API server kept it
}

func (r nginxRun) String() string {
	return fmt.Sprintf("spec=%q nginx_got=%s agent_sent=%s exit=%d status_stop_signals=%v",
		r.spec, r.signal, r.term.StopSignal, r.term.ExitCode, r.statuses)
}

// runNginx creates the pods, waits until they are Ready, deletes them and
// reads what happened to each.
func (l *lab) runNginx(t *testing.T, ctx context.Context, pods ...*corev1.Pod) map[string]nginxRun {
	t.Helper()
	hs, created := map[string]*history{}, map[string]*corev1.Pod{}
	for _, p := range pods {
		created[p.Name], hs[p.Name] = l.create(t, ctx, p)
	}
	for name, h := range hs {
		h.until(t, ctx, name+" Ready", podReady)
	}
	l.deleteAndWait(t, ctx, hs)
	out := map[string]nginxRun{}
	for name, h := range hs {
		r := nginxRun{statuses: map[string]int{}}
		if lc := created[name].Spec.Containers[0].Lifecycle; lc != nil && lc.StopSignal != nil {
			r.spec = string(*lc.StopSignal)
		}
		h.mu.Lock()
		for _, v := range h.versions {
			if cs := v.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Running != nil {
				sig := ""
				if cs[0].StopSignal != nil {
					sig = string(*cs[0].StopSignal)
				}
				r.statuses[sig]++
			}
		}
		h.mu.Unlock()
		for k := range r.statuses {
			r.statuses[k] = 1 // which values, not how many updates
		}
		r.term = l.agent.Terminations(created[name].UID)[0]
		info, _ := l.agent.Pod(created[name].UID)
		r.signal = nginxSignal(t, info.Containers[0].LogPath)
		out[name] = r
	}
	return out
}

// nginxSignal finds nginx's "signal 3 (SIGQUIT) received from …" line.
func nginxSignal(t *testing.T, logPath string) string {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if _, rest, ok := strings.Cut(line, "[notice] "); ok && strings.Contains(rest, ") received") {
			if _, sig, ok := strings.Cut(rest, "("); ok {
				return strings.SplitN(sig, ")", 2)[0]
			}
		}
	}
	return "none"
}

// TestNginxImageStopSignal: image "nginx" carries STOPSIGNAL SIGQUIT, so a
// pod that sets no stop signal has nginx shut down gracefully on SIGQUIT
// (nginx's own log says which signal it got), and the status reports it;
// the pod's lifecycle.stopSignal overrides the image's.
func TestNginxImageStopSignal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-nginx")
	runs := l.runNginx(t, ctx, l.nginxPod(t, "image", ""), l.nginxPod(t, "pod", corev1.SIGTERM))
	got := "image: " + runs["image"].String() + "\npod: " + runs["pod"].String()
	want := `image: spec="" nginx_got=SIGQUIT agent_sent=quit exit=0 status_stop_signals=map[SIGQUIT:1]
pod: spec="SIGTERM" nginx_got=SIGTERM agent_sent=terminated exit=0 status_stop_signals=map[SIGTERM:1]`
	if got != want {
		t.Fatalf("\n got:\n%s\nwant:\n%s", got, want)
	}
}

// TestContainerStopSignalsGateOff: a control plane and node with the
// ContainerStopSignals gate off. The API server drops the pod's
// lifecycle.stopSignal, the node reports no stopSignal in the status, and
// nginx still receives its image's SIGQUIT.
func TestContainerStopSignalsGateOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	privileged.RequireRoot(t)
	cptest.Get(t) // skips or fails like every control-plane test when the binaries are missing
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	cp, err := controlplane.Start(ctx, controlplane.Config{Dir: t.TempDir(), DisableContainerStopSignals: true, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	l := newLabOn(t, ctx, "t-gateoff", cp, func(c *node.Config) { c.DisableContainerStopSignals = true })
	runs := l.runNginx(t, ctx, l.nginxPod(t, "web", corev1.SIGTERM))
	if got, want := runs["web"].String(), `spec="" nginx_got=SIGQUIT agent_sent=quit exit=0 status_stop_signals=map[:1]`; got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
}
