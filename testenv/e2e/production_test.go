package e2e_test

import (
	"context"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// TestNginxImageStopSignal: Debian's nginx in a pod whose image says
// STOPSIGNAL SIGQUIT (nginx's graceful stop) and whose API names no stop
// signal (the node agents do not report status stopSignal, as without the
// ContainerStopSignals gate), readiness probe on. The seeds' client keeps
// sending /work straight at the pod for a second after the deletion while
// a slow download holds nginx alive: every refusal the clients saw is
// refused after the stop signal, SIGQUIT is the stop signal, and the
// kubelet's refused probes are probe_refused, equal to the prober's count.
func TestNginxImageStopSignal(t *testing.T) {
	c, ds := startClusterWith(t, "e2n-", cluster.Options{Nodes: 1, DisableContainerStopSignals: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := unique("e2e-nginx")
	argv, err := workload.Nginx{Dir: t.TempDir(), Addr: strconv.Itoa(cluster.ServerPort), Slow: 2500}.Write()
	if err != nil {
		t.Fatal(err)
	}
	run := runSeeds(ctx, t, c, ds, ns, nginxDeployment(ns, "web", argv[1:]))
	res, got, want := run.res, run.got, run.want
	probes := run.proberRefused(t, c)
	t.Logf("clients %s (work) %s (ready) slow %s; prober refused %d; drainwatch %+v stop %d (API %d) %v partial %v",
		client.Summarize(res.Work), client.Summarize(res.Readiness), res.Slow.Outcome, probes,
		got.Counts, got.StopSignal, got.StopSignalAPI, codes(got), got.PartialReasons)
	if got.StopSignal != uint32(syscall.SIGQUIT) || got.StopSignalAPI != 0 {
		t.Errorf("stop signal %d (API %d), want SIGQUIT from the image and none from the API", got.StopSignal, got.StopSignalAPI)
	}
	assertSeedsRefusals(t, got, res, want, probes)
	if res.Slow.Outcome != client.OK || got.Counts.RequestsKilledBySigkill != 0 || got.Partial {
		t.Errorf("slow %s, killed %d, partial %v: want the graceful stop to finish the download, complete view",
			res.Slow.Outcome, got.Counts.RequestsKilledBySigkill, got.PartialReasons)
	}
	if !slices.Contains(codes(got), "listener_closed_before_routing_converged") {
		t.Errorf("diagnoses %v, want listener_closed_before_routing_converged", codes(got))
	}
}

// nginxDeployment runs the testenv image "nginx" (Debian's nginx, image
// config STOPSIGNAL SIGQUIT) with args, a readiness probe on /work.
func nginxDeployment(ns, name string, args []string) *appsv1.Deployment {
	dep := cluster.ServerDeployment(ns, name, workload.ModeNaive, 1)
	ct := &dep.Spec.Template.Spec.Containers[0]
	ct.Name, ct.Image, ct.Args = "nginx", "nginx", args
	ct.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
		HTTPGet: &corev1.HTTPGetAction{Path: "/work", Port: intstr.FromString("http")}}}
	dep.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: name}
	return dep
}
