package daemon_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/collector/kube"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

// recorder is an APISink that keeps everything it receives.
type recorder struct {
	mu        sync.Mutex
	pods      []collector.PodUpdate
	deleted   []collector.PodDeleted
	kubelet   []collector.KubeletEvent
	endpoints []collector.EndpointUpdate
}

func (r *recorder) Pod(u collector.PodUpdate) { r.mu.Lock(); r.pods = append(r.pods, u); r.mu.Unlock() }
func (r *recorder) PodDeleted(d collector.PodDeleted) {
	r.mu.Lock()
	r.deleted = append(r.deleted, d)
	r.mu.Unlock()
}
func (r *recorder) Kubelet(e collector.KubeletEvent) {
	r.mu.Lock()
	r.kubelet = append(r.kubelet, e)
	r.mu.Unlock()
}
func (r *recorder) Endpoint(u collector.EndpointUpdate) {
	r.mu.Lock()
	r.endpoints = append(r.endpoints, u)
	r.mu.Unlock()
}

// waitFor polls cond under the recorder's lock.
func (r *recorder) waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return cond(), nil
	})
	if err != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		t.Fatalf("waiting for %s: %v\npods=%d deleted=%v kubelet=%v endpoints=%+v", what, err, len(r.pods), r.deleted, r.kubelet, r.endpoints)
	}
}

func testLogger(t *testing.T) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel).With().Timestamp().Logger()
}

// startKube runs the API-side collector of node until the test ends.
func startKube(t *testing.T, cfg *rest.Config, node string) (*kube.Kube, *recorder) {
	t.Helper()
	rest := rest.CopyConfig(cfg)
	rest.ContentType = "application/vnd.kubernetes.protobuf"
	rec := &recorder{}
	k, err := kube.New(kube.Config{NodeName: node, Rest: rest, Sink: rec, Log: testLogger(t), Linger: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("kube collector: %v", err)
		}
	})
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return k.Synced(), nil }); err != nil {
		t.Fatalf("pod watch of %s did not sync: %v", node, err)
	}
	return k, rec
}

func uniqueNode(prefix string) string { return prefix + "-" + strings.ToLower(rand.String(5)) }

// TestKubeSeesOnlyItsNode: the pod informer's field selector keeps other
// nodes' pods out, and a bare pod has no workload.
func TestKubeSeesOnlyItsNode(t *testing.T) {
	cp := cptest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := cp.Client
	ns := newNamespace(ctx, t, c, "only-node")
	nodeA, nodeB := uniqueNode("a"), uniqueNode("b")
	_, rec := startKube(t, cp.RestConfig, nodeA)
	for i, node := range []string{nodeA, nodeB, nodeA, nodeB} {
		if _, err := c.CoreV1().Pods(ns).Create(ctx, barePod(fmt.Sprintf("p%d", i), node, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A marker pod created last: once it is seen, every earlier pod of
	// nodeA has been seen too (one watch, in order).
	if _, err := c.CoreV1().Pods(ns).Create(ctx, barePod("marker", nodeA, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(ctx, t, "marker pod", func() bool {
		for _, u := range rec.pods {
			if u.Pod.Name == "marker" {
				return true
			}
		}
		return false
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	names := map[string]bool{}
	for _, u := range rec.pods {
		if u.Pod.Node != nodeA {
			t.Errorf("node %s received pod %s of node %s", nodeA, u.Pod.Name, u.Pod.Node)
		}
		if u.Pod.Workload != (collector.Workload{Namespace: ns, Kind: "none"}) {
			t.Errorf("bare pod %s has workload %+v", u.Pod.Name, u.Pod.Workload)
		}
		names[u.Pod.Name] = true
	}
	if len(names) != 3 || !names["p0"] || !names["p2"] || !names["marker"] {
		t.Fatalf("pods seen = %v, want p0, p2, marker", names)
	}
}

// TestKubeEndpointLifecycle follows one local pod through the real
// endpointslice controller: ready, then terminating (ready=false,
// serving=true), then gone, with its Killing Event and its deletion.
func TestKubeEndpointLifecycle(t *testing.T) {
	cp := cptest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := cp.Client
	ns := newNamespace(ctx, t, c, "endpoints")
	node := uniqueNode("ep")
	newNode(ctx, t, c, node)
	_, rec := startKube(t, cp.RestConfig, node)
	if _, err := c.CoreV1().Services(ns).Create(ctx, serviceFor("web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := c.CoreV1().Pods(ns).Create(ctx, barePod("web-1", node, map[string]string{"app": "web"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uid := string(pod.UID)
	markRunning(pod, "10.98.0.9", "containerd://"+strings.Repeat("ab", 32))
	if pod, err = c.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := func(present, ready, serving, terminating bool) func() bool {
		return func() bool {
			if n := len(rec.endpoints); n > 0 {
				e := rec.endpoints[n-1]
				return e.PodUID == uid && e.Present == present && e.Ready == ready && e.Serving == serving && e.Terminating == terminating
			}
			return false
		}
	}
	rec.waitFor(ctx, t, "ready endpoint", want(true, true, true, false))

	if err := c.CoreV1().Pods(ns).Delete(ctx, "web-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(ctx, t, "terminating endpoint", want(true, false, true, true))
	killing(ctx, c, pod, node)
	rec.waitFor(ctx, t, "Killing event", func() bool {
		return len(rec.kubelet) == 1 && rec.kubelet[0].PodUID == uid && rec.kubelet[0].Reason == "Killing"
	})
	if err := c.CoreV1().Pods(ns).Delete(ctx, "web-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(ctx, t, "endpoint gone", want(false, false, false, false))
	rec.waitFor(ctx, t, "pod deleted", func() bool { return len(rec.deleted) == 1 && rec.deleted[0].UID == uid })

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.endpoints) != 3 {
		t.Errorf("endpoint updates = %+v, want exactly ready, terminating, gone", rec.endpoints)
	}
	var deleting *collector.Pod
	for _, u := range rec.pods {
		if !u.Pod.DeletionTimestamp.IsZero() && deleting == nil {
			deleting = &u.Pod
		}
	}
	if deleting == nil || deleting.DeletionGracePeriod != 30*time.Second || deleting.Containers[0].ID != strings.Repeat("ab", 32) {
		t.Errorf("first deleting pod update = %+v, want grace 30s and the container id", deleting)
	}
}

// TestKubeRolloutElsewhereCostsNothing measures the watch events a node
// receives while a workload with no pod on it rolls out in the same
// namespace as one of its own pods (the worst case: that namespace's
// Services are watched). The goal, and the assertion, is zero.
func TestKubeRolloutElsewhereCostsNothing(t *testing.T) {
	cp := cptest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := cp.Client
	ns := newNamespace(ctx, t, c, "elsewhere")
	quiet, busy := uniqueNode("quiet"), uniqueNode("busy")
	newNode(ctx, t, c, quiet)
	newNode(ctx, t, c, busy)
	for _, name := range []string{"web", "other"} {
		if _, err := c.CoreV1().Services(ns).Create(ctx, serviceFor(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	go fakeKubelet(ctx, c, ns, quiet, 10)
	go fakeKubelet(ctx, c, ns, busy, 500)
	if _, err := c.CoreV1().Pods(ns).Create(ctx, barePod("web-local", quiet, map[string]string{"app": "web"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dep := deploymentOn("other", busy, 3)
	dep.Spec.Template.Spec.NodeSelector = nil
	dep.Spec.Template.Spec.NodeName = busy
	if _, err := c.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	quietKube, quietRec := startKube(t, cp.RestConfig, quiet)
	busyKube, _ := startKube(t, cp.RestConfig, busy)
	quietRec.waitFor(ctx, t, "web-local ready endpoint", func() bool {
		n := len(quietRec.endpoints)
		return n > 0 && quietRec.endpoints[n-1].Ready
	})
	waitReady(ctx, t, c, ns, "other", 3, "1")
	time.Sleep(time.Second) // let the first rollout's last updates arrive
	before, busyBefore := quietKube.Stats(), busyKube.Stats()

	if _, err := cp.Kubectl(ctx, "-n", ns, "rollout", "restart", "deployment/other"); err != nil {
		t.Fatal(err)
	}
	waitReady(ctx, t, c, ns, "other", 3, "2")
	time.Sleep(2 * time.Second) // updates still in flight to the quiet node would arrive now
	after, busyAfter := quietKube.Stats(), busyKube.Stats()
	t.Logf("rollout of 3 pods on %s: quiet node received pods=%d services=%d slices=%d events=%d; busy node received pods=%d slices=%d events=%d",
		busy, after.PodEvents-before.PodEvents, after.ServiceEvents-before.ServiceEvents, after.SliceEvents-before.SliceEvents,
		after.KubeletEvents-before.KubeletEvents, busyAfter.PodEvents-busyBefore.PodEvents,
		busyAfter.SliceEvents-busyBefore.SliceEvents, busyAfter.KubeletEvents-busyBefore.KubeletEvents)
	if after != before {
		t.Errorf("quiet node's watch events changed during a rollout elsewhere: before %+v, after %+v", before, after)
	}
	if busyAfter.SliceEvents == busyBefore.SliceEvents {
		t.Errorf("busy node received no slice events during its own rollout: the measurement is not measuring")
	}
}

// waitReady waits until the Deployment app is at revision with want
// Ready pods and no pod of an older revision left.
func waitReady(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, app string, want int, revision string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		d, err := c.AppsV1().Deployments(ns).Get(ctx, app, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, nil
		}
		st := d.Status
		last = fmt.Sprintf("revision %s, status %+v, %d pods", d.Annotations["deployment.kubernetes.io/revision"], st, len(pods.Items))
		return d.Annotations["deployment.kubernetes.io/revision"] == revision && st.ObservedGeneration >= d.Generation &&
			int(st.UpdatedReplicas) == want && int(st.ReadyReplicas) == want && int(st.Replicas) == want &&
			len(pods.Items) == want, nil
	})
	if err != nil {
		t.Fatalf("deployment %s revision %s not ready: %v (last: %s)", app, revision, err, last)
	}
}
