package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/node"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

const (
	serverNS   = "bench"
	serverName = "nginx"
	// terminatingFor keeps a deleted server pod serving: its preStop sleeps
	// this long, within as long a grace. The bench force-deletes it after
	// its measurement.
	terminatingFor = 3600
)

// server is the running nginx pod under load.
type server struct {
	pod    corev1.Pod
	cgroup string // the pod's cgroup v2 directory
	pid    int    // a process in the pod's network namespace
}

func (s server) url() string {
	return fmt.Sprintf("http://%s:%d/work", s.pod.Status.PodIP, cluster.ServerPort)
}

// deployServer runs Debian's nginx (testenv image "nginx", one worker) as a
// one-replica Deployment pinned to nodeName, with a long preStop sleep.
func deployServer(ctx context.Context, c *cluster.Cluster, nodeName string) error {
	argv, err := workload.Nginx{Dir: filepath.Join(c.Dir, "bench-nginx"), Addr: strconv.Itoa(cluster.ServerPort)}.Write()
	if err != nil {
		return err
	}
	dep := cluster.ServerDeployment(serverNS, serverName, workload.ModeNaive, 1)
	spec := &dep.Spec.Template.Spec
	grace := int64(terminatingFor)
	spec.NodeName, spec.TerminationGracePeriodSeconds = nodeName, &grace
	ct := &spec.Containers[0]
	ct.Name, ct.Image, ct.Args = "nginx", "nginx", argv[1:]
	ct.ReadinessProbe.HTTPGet = &corev1.HTTPGetAction{Path: "/work", Port: intstr.FromString("http")}
	ct.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: terminatingFor}}}
	if err := c.Apply(ctx, cluster.Namespace(serverNS), dep); err != nil {
		return err
	}
	_, err = c.WaitRolledOut(ctx, serverNS, serverName)
	return err
}

// readyServer waits for the Deployment's ready, not terminating pod.
func readyServer(ctx context.Context, c *cluster.Cluster, cgroupRoot string) (server, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		pods, err := c.ReadyPods(ctx, serverNS, "app="+serverName)
		if err == nil && len(pods) == 1 {
			return newServer(pods[0], cgroupRoot)
		}
		select {
		case <-ctx.Done():
			return server{}, fmt.Errorf("no ready nginx pod (%v): %w", err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func newServer(pod corev1.Pod, cgroupRoot string) (server, error) {
	s := server{pod: pod, cgroup: filepath.Join(cgroupRoot, node.PodSlice(node.QOSClass(&pod), pod.UID))}
	if _, err := os.Stat(s.cgroup); err != nil {
		return s, fmt.Errorf("the nginx pod's cgroup: %w", err)
	}
	var err error
	s.pid, err = firstPID(s.cgroup)
	return s, err
}

// startTerminating deletes the pod with its full grace: the preStop keeps
// nginx serving while the API (and drainwatch) see it terminating.
func (s server) startTerminating(ctx context.Context, c *cluster.Cluster) error {
	err := c.Client.CoreV1().Pods(serverNS).Delete(ctx, s.pod.Name, metav1.DeleteOptions{})
	if err != nil {
		return fmt.Errorf("deleting the nginx pod: %w", err)
	}
	// The node agent starts the preStop and drainwatch learns of the
	// deletion from its watch: give both a moment before the load.
	time.Sleep(time.Second)
	return nil
}

// forceDelete ends a terminating pod at once and waits until it is gone.
func (s server) forceDelete(ctx context.Context, c *cluster.Cluster) error {
	zero := int64(0)
	err := c.Client.CoreV1().Pods(serverNS).Delete(ctx, s.pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil {
		return fmt.Errorf("force-deleting the nginx pod: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return c.WaitPodGone(ctx, serverNS, s.pod.Name)
}
