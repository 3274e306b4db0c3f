package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/gobuild"
	"github.com/drainwatch/drainwatch/testenv/netlab"
	"github.com/drainwatch/drainwatch/testenv/router"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// adviseLag is the router's propagation delay; the servers drain for
// adviseDrain after their stop signal, longer than it, so that every
// connection the router sends inside its lag reaches a live pod and the
// measured lag is the router's, not cut short by the pod's end.
const (
	adviseLag   = 1500 * time.Millisecond
	adviseDrain = "--drain-delay=3s"
)

// TestAdvisePatchFromMeasuredLag: three pods of a Deployment behind a
// router that follows EndpointSlices adviseLag late are deleted under load.
// Each termination's lag from the router is within the router's own record
// of its last send to that pod. The real `drainwatch advise -o patch`,
// reading the daemon over its HTTP API, prints a patch that the real
// kubectl applies unchanged; the Deployment then sleeps
// ⌈max lag + 1 s⌉ in preStop (p99 of 3 is the largest) and has a grace of
// that + ⌈max drain + 1 s⌉, computed here from the daemon's terminations.
// Asked again, advise finds nothing to change, and its --emit-policy,
// applied with kubectl, warns about a Deployment that sleeps 1 s.
func TestAdvisePatchFromMeasuredLag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, ds, adviser := servingCluster(ctx, t, "e2adv-")
	ns := unique("e2e-advise")
	dep := cluster.ServerDeployment(ns, "web", workload.ModeProtocol, 3, adviseDrain)
	five := int64(5)
	dep.Spec.Template.Spec.TerminationGracePeriodSeconds = &five
	pods := deploy(ctx, t, c, ns, dep)
	waitWatching(ctx, t, ds, pods)
	r, err := c.StartRouter(ctx, cluster.RouterConfig{Namespace: ns, Service: "web", Delay: adviseLag})
	if err != nil {
		t.Fatal(err)
	}
	for len(r.Backends()) != 3 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	load := client.Load{Dial: c.Dial, Target: r.Addr(), Path: "/work", Interval: 20 * time.Millisecond, Count: 300, Duration: 6 * time.Second, Timeout: time.Second}
	done := make(chan struct{})
	go func() { load.Run(ctx); close(done) }()
	time.Sleep(time.Second)
	for _, p := range pods {
		if err := c.DeletePod(ctx, ns, p.Name); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	var maxLag, maxDrain time.Duration
	for i := range pods {
		got := waitComplete(ctx, t, ds[0], string(pods[i].UID))
		maxLag, maxDrain = max(maxLag, checkRouterLag(t, r.Conns(), &pods[i], got)), max(maxDrain, drainOf(t, got))
	}
	sleep := int64(math.Ceil((maxLag + time.Second).Seconds()))
	grace := sleep + int64(math.Ceil((maxDrain + time.Second).Seconds()))
	t.Logf("measured: routing lag max %v, drain max %v: want preStop sleep %d s, grace %d s", maxLag, maxDrain, sleep, grace)

	advise := func(args ...string) string { return adviser(ns, args...) }
	t.Logf("drainwatch advise:\n%s", advise())
	patch := strings.TrimSpace(advise("-o", "patch"))
	out, err := c.Kubectl(ctx, "patch", "-n", ns, "deployment/web", "-p", patch)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl patch -p %s: %s", patch, out)
	d, err := c.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := d.Spec.Template.Spec
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g != grace {
		t.Errorf("terminationGracePeriodSeconds %v, want %d", g, grace)
	}
	for _, ctr := range spec.Containers {
		if l := ctr.Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Sleep == nil || l.PreStop.Sleep.Seconds != sleep || l.PreStop.Exec != nil {
			t.Errorf("container %s: lifecycle %+v, want preStop sleep %d s", ctr.Name, l, sleep)
		}
	}
	if again := strings.TrimSpace(advise("-o", "patch")); again != "{}" {
		t.Errorf("advise -o patch after the patch: %s, want {}", again)
	}
	checkEmittedPolicy(ctx, t, c, ns, advise("--emit-policy"), sleep)
}

// servingCluster is a node with a daemon serving its HTTP API on
// loopback, and a runner of the built `drainwatch advise` against it and
// the cluster's kubeconfig for deploy/web of a namespace.
func servingCluster(ctx context.Context, t *testing.T, prefix string) (*cluster.Cluster, []*nodeDaemon, func(ns string, args ...string) string) {
	t.Helper()
	c := startNodes(t, prefix, cluster.Options{Nodes: 1})
	bin := make(chan string, 1)
	go func() {
		p, err := gobuild.Main(ctx, "./cmd/drainwatch", t.TempDir(), "drainwatch")
		if err != nil {
			t.Errorf("building drainwatch: %v", err)
		}
		bin <- p
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := daemonConfig(t, c.RestConfig, c.NodeNames[0], t.TempDir(), "")
	cfg.Listener = ln
	ds := []*nodeDaemon{runDaemon(t, cfg)}
	var drainwatch string
	return c, ds, func(ns string, args ...string) string {
		t.Helper()
		if drainwatch == "" {
			drainwatch = <-bin
		}
		base := []string{"advise", "-n", ns, "deploy/web", "--url", "http://" + ln.Addr().String(), "--kubeconfig", c.Kubeconfig}
		out, err := exec.CommandContext(ctx, drainwatch, append(base, args...)...).Output()
		if err != nil {
			t.Fatalf("drainwatch advise %v: %v: %s", args, err, exitStderr(err))
		}
		return string(out)
	}
}

// checkRouterLag checks that the termination's routing source (the router,
// an outside source in the fabric) sent last within the router's own
// record of its last connection to the pod, and returns the lag.
func checkRouterLag(t *testing.T, conns []router.Conn, p *corev1.Pod, got correlate.Termination) time.Duration {
	t.Helper()
	mark := got.Marks.EndpointsNotReady
	want := routerSends(conns, cluster.PodAddr(p, cluster.ServerPort), mark)
	s, ok := sourceNamed(got, "external "+netlab.FabricIP(1))
	lag, lagOK := got.RoutingLag()
	t.Logf("%s: routing lag %v; router's last send between %v and %v after endpoints_not_ready; drainwatch's source %+v",
		p.Name, lag, want.lastFrom.Sub(mark), want.lastTo.Sub(mark), s)
	switch {
	case mark.IsZero() || !ok || !lagOK:
		t.Fatalf("%s: no endpoints_not_ready, routing source or lag: %+v", p.Name, got)
	case s.Last.Before(want.lastFrom) || s.Last.After(want.lastTo):
		t.Errorf("%s: last send %v after the mark, the router's was accepted at %v and dialed by %v",
			p.Name, s.Lag, want.lastFrom.Sub(mark), want.lastTo.Sub(mark))
	case lag != s.Lag:
		t.Errorf("%s: routing lag %v, the router's %v: another source sent later", p.Name, lag, s.Lag)
	}
	return lag
}

func drainOf(t *testing.T, got correlate.Termination) time.Duration {
	t.Helper()
	d, ok := got.Durations()[correlate.DurDrain]
	if !ok || got.Partial {
		t.Fatalf("%s: no drain duration, or partial (%v): %+v", got.Pod, got.PartialReasons, got.Marks)
	}
	return d
}

// checkEmittedPolicy applies advise's --emit-policy with kubectl and
// server-side dry-runs the Deployment with a 1 s sleep until the warning
// naming the measured sleep comes (the policy's informers take a moment).
func checkEmittedPolicy(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, policy string, sleep int64) {
	t.Helper()
	if _, err := c.Kubectl(ctx, "apply", "-f", writeTemp(t, "policy.yaml", policy)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Kubectl(context.Background(), "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", "drainwatch-measured-minimums", "--ignore-not-found")
	})
	short := (`{"spec":{"template":{"spec":{"containers":[{"name":"server","lifecycle":{"preStop":{"sleep":{"seconds":1}}}}]}}}}`)
	want := fmt.Sprintf("Deployment web: preStop sleep 1 s is below the %d s drainwatch measured on this cluster", sleep)
	var out []byte
	for ctx.Err() == nil {
		out, _ = c.Kubectl(ctx, "patch", "-n", ns, "deployment/web", "--dry-run=server", "-p", short)
		if strings.Contains(string(out), want) {
			t.Logf("kubectl patch (preStop sleep 1 s, dry run):\n%s", out)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("no warning %q: %s", want, out)
}

func writeTemp(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// exitStderr is what a command that failed wrote to stderr.
func exitStderr(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}
