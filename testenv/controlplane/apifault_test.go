package controlplane_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

// TestRestartAPIServer stops kube-apiserver for 2 s and starts it again in
// place: while down its port refuses connections; afterwards the same
// kubeconfig works and what was stored before is still there (same etcd).
func TestRestartAPIServer(t *testing.T) {
	cp := cptest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := cp.Client
	ns := createNamespace(ctx, t, c, "apirestart")
	before, err := c.CoreV1().ConfigMaps(ns).Create(ctx, configMap("before"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := cp.APIServerPID()
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	_, err = c.CoreV1().ConfigMaps(ns).Get(ctx, "before", metav1.GetOptions{})
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a Get while the API server is down: %v, want connection refused", err)
	}
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if again, _ := cp.APIServerPID(); again == pid {
		t.Errorf("kube-apiserver pid %d unchanged: it was not restarted", pid)
	}
	if _, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "before", metav1.GetOptions{}); err != nil {
		t.Errorf("the ConfigMap created before the restart: %v", err)
	}
	if _, err := cp.Kubectl(ctx, "-n", ns, "get", "configmap", "before"); err != nil {
		t.Errorf("kubectl with the same kubeconfig after the restart: %v", err)
	}
	// The restarted API server's watch cache begins at etcd's current
	// revision: a watch from before the restart is too old (410), which
	// makes every informer relist once, as on a real control plane.
	w, err := c.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: before.ResourceVersion})
	if err != nil {
		t.Fatalf("watching from the resourceVersion of before the restart: %v", err)
	}
	ev := <-w.ResultChan()
	w.Stop()
	if st, ok := ev.Object.(*metav1.Status); ev.Type != watch.Error || !ok || st.Code != 410 {
		t.Errorf("a watch from before the restart: %s %+v, want ERROR 410 (too old resource version)", ev.Type, ev.Object)
	}
	list, err := c.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w, err = c.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion}); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, configMap("after"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := <-w.ResultChan(); ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).Name != "after" {
		t.Errorf("first event of the watch after the relist: %s %+v, want ADDED configmap after", ev.Type, ev.Object)
	}
}

// TestFreezeAPIServer freezes kube-apiserver for 3 s: a request sent
// meanwhile gets no answer (its 1 s timeout ends it, where a stopped API
// server would refuse it at once), and the same process answers after.
func TestFreezeAPIServer(t *testing.T) {
	cp := cptest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pid, _ := cp.APIServerPID()
	frozen := make(chan error, 1)
	go func() { frozen <- cp.FreezeAPIServer(ctx, 3*time.Second) }()
	time.Sleep(200 * time.Millisecond) // SIGSTOP delivered
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	_, err := cp.Client.CoreV1().Namespaces().Get(short, "default", metav1.GetOptions{})
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a Get while the API server is frozen: %v, want its deadline exceeded", err)
	}
	if err := <-frozen; err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("a Get after the freeze: %v", err)
	}
	if again, _ := cp.APIServerPID(); again != pid {
		t.Errorf("kube-apiserver pid %d after the freeze, was %d: a freeze must not restart it", again, pid)
	}
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
}
