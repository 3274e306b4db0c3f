package e2e_test

import (
	"context"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/realnode"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// TestRealNodeNginxImageStopSignal is TestNginxImageStopSignal on the real
// node: Debian's nginx (with its libraries) in an image whose config says
// STOPSIGNAL SIGQUIT, readiness probe on. The kubelet 1.37 reports no
// status stopSignal (its ContainerStopSignals gate is off) and containerd
// 1.6 takes the signal from the image config. The clients send for 3 s,
// not the seeds' 1: the real kubelet's stop signal comes up to ~1.7 s
// after the delete call here. Refused after the stop signal equals the
// clients', and probe_refused equals the refused probes in the kubelet's
// own log.
func TestRealNodeNginxImageStopSignal(t *testing.T) {
	files, err := realnode.HostBinaries(workload.NginxPath)
	if err != nil {
		t.Fatal(err)
	}
	e := startRealNode(t, "e2rn", realnode.Image{Ref: "docker.io/library/nginx:latest", Files: files,
		Entrypoint: []string{workload.NginxPath}, StopSignal: "SIGQUIT"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := unique("e2e-rn-nginx")
	dir := t.TempDir()
	argv, err := workload.Nginx{Dir: dir, Addr: strconv.Itoa(cluster.ServerPort), Slow: 2500}.Write()
	if err != nil {
		t.Fatal(err)
	}
	dep := nginxDeployment(ns, "web", argv[1:])
	e.onRealNode(dep)
	// nginx's config, /slow's file and its logs are in dir, mounted at the
	// same path (the stand-in runs nginx on the host's filesystem).
	spec := &dep.Spec.Template.Spec
	spec.Volumes = []corev1.Volume{{Name: "nginx", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}}}}
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "nginx", MountPath: dir}}
	run := runSeedsFor(ctx, t, e.c, e.ds, ns, dep, 3*time.Second)
	res, got, want := run.res, run.got, run.want
	probes, err := e.node.ProbeRefusals(run.victim.Namespace+"/"+run.victim.Name, res.StopAt)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("clients %s (work) %s (ready) slow %s; kubelet's probes refused %d; drainwatch %+v stop %d (API %d) %v partial %v; stop signal %.3f s after the delete call",
		client.Summarize(res.Work), client.Summarize(res.Readiness), res.Slow.Outcome, probes,
		got.Counts, got.StopSignal, got.StopSignalAPI, codes(got), got.PartialReasons, got.Marks.StopSignal.Sub(res.StopAt).Seconds())
	if got.StopSignal != uint32(syscall.SIGQUIT) || got.StopSignalAPI != 0 {
		t.Errorf("stop signal %d (API %d), want SIGQUIT from the image and none from the API", got.StopSignal, got.StopSignalAPI)
	}
	assertSeedsRefusals(t, got, res, want, probes)
	if res.Slow.Outcome != client.OK || got.Counts.RequestsKilledBySigkill != 0 || got.Partial || got.ExitCode != 0 {
		t.Errorf("slow %s, killed %d, partial %v, exit %d: want the graceful stop to finish the download, complete view, exit 0",
			res.Slow.Outcome, got.Counts.RequestsKilledBySigkill, got.PartialReasons, got.ExitCode)
	}
	if !slices.Contains(codes(got), "listener_closed_before_routing_converged") {
		t.Errorf("diagnoses %v, want listener_closed_before_routing_converged", codes(got))
	}
}
