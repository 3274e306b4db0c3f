package node_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
	"github.com/drainwatch/drainwatch/testenv/netlab"
	"github.com/drainwatch/drainwatch/testenv/node"
	"github.com/drainwatch/drainwatch/testenv/privileged"
	"github.com/drainwatch/drainwatch/testenv/workload"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperAgent())
	}
	cptest.Main(m)
}

var dwserver struct {
	once sync.Once
	path string
	err  error
}

// lab is one test's world: the shared control plane, a fresh fabric, one
// node agent and a namespace of its own.
type lab struct {
	client kubernetes.Interface
	fabric *netlab.NS
	agent  *node.Agent
	ns     string
}

func newLab(t *testing.T, ctx context.Context, nodeName string) *lab {
	t.Helper()
	privileged.RequireRoot(t)
	return newLabOn(t, ctx, nodeName, cptest.Get(t), nil)
}

// newLabOn is newLab against the control plane cp, with tweak applied to
// the agent's Config.
func newLabOn(t *testing.T, ctx context.Context, nodeName string, cp *controlplane.ControlPlane, tweak func(*node.Config)) *lab {
	t.Helper()
	privileged.RequireRoot(t)
	dwserver.once.Do(func() { dwserver.path, dwserver.err = workload.Build(ctx, os.TempDir()) })
	if dwserver.err != nil {
		t.Fatal(dwserver.err)
	}
	// Unique names: the control plane is shared by the package's tests and
	// by -count=N repeats; a node name reused would adopt old pods.
	nodeName = uniqueName(nodeName)
	l := &lab{client: cp.Client, ns: nodeName}
	fabric, err := netlab.NewFabric("fabric")
	if err != nil {
		t.Fatal(err)
	}
	l.fabric = fabric
	t.Cleanup(func() { _ = fabric.Close() })
	if _, err := l.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: l.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	cfg := node.Config{Name: nodeName, Index: 0, Client: l.client, Fabric: fabric,
		Images: map[string]node.Image{workload.ImageName: {Entrypoint: dwserver.path}}, Logger: log}
	if tweak != nil {
		tweak(&cfg)
	}
	l.agent, err = node.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.agent.Stop)
	return l
}

// serverPod is a dwserver pod bound to the lab's node, with a 1 s readiness
// probe on /ready.
func (l *lab) serverPod(name, mode string, grace int64, preStop *corev1.LifecycleHandler) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: l.ns, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName: l.agent.Name(), TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "srv", Image: workload.ImageName, Args: []string{"--mode=" + mode},
				Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}}},
				Lifecycle:      &corev1.Lifecycle{PreStop: preStop},
			}},
		},
	}
}

// history records every version of a pod from creation to deletion.
type history struct {
	mu       sync.Mutex
	versions []*corev1.Pod
	deleted  chan struct{}
}

// create creates the pod and starts recording its versions.
func (l *lab) create(t *testing.T, ctx context.Context, pod *corev1.Pod) (*corev1.Pod, *history) {
	t.Helper()
	w, err := l.client.CoreV1().Pods(l.ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", pod.Name).String()})
	if err != nil {
		t.Fatal(err)
	}
	h := &history{deleted: make(chan struct{})}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			h.mu.Lock()
			h.versions = append(h.versions, p)
			h.mu.Unlock()
			if ev.Type == watch.Deleted {
				close(h.deleted)
				return
			}
		}
	}()
	created, err := l.client.CoreV1().Pods(l.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created, h
}

// until polls the pod's latest version (every 100 ms, bounded by ctx) until
// ok says so.
func (h *history) until(t *testing.T, ctx context.Context, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	for {
		h.mu.Lock()
		var last *corev1.Pod
		if n := len(h.versions); n > 0 {
			last = h.versions[n-1]
		}
		h.mu.Unlock()
		if last != nil && ok(last) {
			return last
		}
		select {
		case <-ctx.Done():
			if last == nil {
				t.Fatalf("waiting for %s: %v (no version seen)", what, ctx.Err())
			}
			t.Fatalf("waiting for %s: %v (last status: %+v)", what, ctx.Err(), last.Status)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// lastBeforeDelete waits for the deletion and returns the last version.
func (h *history) lastBeforeDelete(t *testing.T, ctx context.Context) *corev1.Pod {
	t.Helper()
	select {
	case <-h.deleted:
	case <-ctx.Done():
		t.Fatalf("pod not deleted: %v", ctx.Err())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.versions[len(h.versions)-1]
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// events lists the Events about a pod, oldest first.
func (l *lab) events(t *testing.T, ctx context.Context, uid string) []corev1.Event {
	t.Helper()
	list, err := l.client.CoreV1().Events(l.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + uid})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func eventLine(e corev1.Event) string {
	return fmt.Sprintf("%s %s %q %s %s/%s", e.Type, e.Reason, e.Message, e.InvolvedObject.FieldPath, e.Source.Component, e.Source.Host)
}

// mustNotExist fails for every path that still exists.
func mustNotExist(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still exists (err %v)", p, err)
		}
	}
}

// waitGone waits up to d for every path to be removed, then fails for those
// that are still there. The agent tears a sandbox down in order (namespace,
// then the sandbox scope, then the pod slice), and a forced delete removes
// the Pod object before that teardown ends, so a test cannot check them at
// one instant.
func waitGone(t *testing.T, d time.Duration, paths ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		left := 0
		for _, p := range paths {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				left++
			}
		}
		if left == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	mustNotExist(t, paths...)
}

// uniqueName appends 4 random hex digits to a test's name.
func uniqueName(base string) string {
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%x", base, b)
}
