package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// TestEndpointSliceDuringTermination: the real endpointslice controller
// shows a deleted pod as ready=false, serving=true, terminating=true while it
// terminates (ignore-term keeps serving until SIGKILL, so its probe passes),
// then drops it; the container dies of SIGKILL when the 2 s grace runs out.
func TestEndpointSliceDuringTermination(t *testing.T) {
	c := twoNodes(t, "es-")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := uniqueNS("slices")
	dep := cluster.ServerDeployment(ns, "web", workload.ModeIgnoreTerm, 1)
	grace := int64(2)
	dep.Spec.Template.Spec.TerminationGracePeriodSeconds = &grace
	if err := c.Apply(ctx, cluster.Namespace(ns), dep, cluster.ServiceFor(ns, "web")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitRolledOut(ctx, ns, "web"); err != nil {
		t.Fatal(err)
	}
	pods, err := c.ReadyPods(ctx, ns, "app=web")
	if err != nil {
		t.Fatal(err)
	}
	ip := pods[0].Status.PodIP
	states := make(chan []string, 1)
	go func() { states <- endpointStates(ctx, c, ns, ip) }()
	time.Sleep(200 * time.Millisecond)
	if err := c.DeletePod(ctx, ns, pods[0].Name); err != nil {
		t.Fatal(err)
	}
	want := []string{"ready=true serving=true terminating=false", "ready=false serving=true terminating=true", "gone"}
	if got := <-states; !slices.Equal(got, want) {
		t.Fatalf("endpoint states of %s: %q, want %q", ip, got, want)
	}
	term, err := c.WaitTerminated(ctx, pods[0].UID)
	if err != nil {
		t.Fatal(err)
	}
	if term.ExitCode != 137 || term.SIGKILLAt.IsZero() {
		t.Fatalf("exit code %d, SIGKILL at %v; want 137 after SIGKILL", term.ExitCode, term.SIGKILLAt)
	}
}

// endpointStates polls the Service's slices every 20 ms and returns the
// distinct successive states of the endpoint with address ip, from its first
// appearance until it is gone.
func endpointStates(ctx context.Context, c *cluster.Cluster, ns, ip string) []string {
	var states []string
	for ctx.Err() == nil {
		list, err := c.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			continue
		}
		s := endpointState(list.Items, ip)
		if len(states) == 0 && s == "gone" {
			// Not published yet: the slice may trail the pod's readiness.
		} else if len(states) == 0 || states[len(states)-1] != s {
			states = append(states, s)
		}
		if s == "gone" && len(states) > 0 {
			return states
		}
		time.Sleep(20 * time.Millisecond)
	}
	return states
}

func endpointState(slices []discoveryv1.EndpointSlice, ip string) string {
	b := func(p *bool) bool { return p != nil && *p }
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if len(e.Addresses) > 0 && e.Addresses[0] == ip {
				c := e.Conditions
				return fmt.Sprintf("ready=%t serving=%t terminating=%t", b(c.Ready), b(c.Serving), b(c.Terminating))
			}
		}
	}
	return "gone"
}
