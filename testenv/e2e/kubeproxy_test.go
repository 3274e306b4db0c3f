package e2e_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/kubeproxy"
	"github.com/drainwatch/drainwatch/testenv/lab"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// kubeProxyLag is kube-proxy's minSyncPeriod in these runs: a sync just
// before the delete holds the next one back by up to this long, the lag a
// busy node's kube-proxy has on average minSyncPeriod/2 of.
const kubeProxyLag = time.Second

// TestSeedsKubeProxy runs the seeds' experiment through a ClusterIP Service
// programmed by the real kube-proxy, as the seeds ran it: /work goes to the
// ClusterIP from inside the node's namespace and kube-proxy's DNAT picks one
// of two pods; the victim is deleted right after a kube-proxy sync, so its
// removal from the rules waits out minSyncPeriod. A pod's refusal crosses
// the DNAT back to the client as ECONNREFUSED: every connection the clients
// saw refused (through the Service, and /ready straight at the pod) is one
// refused_after_sigterm, exactly.
func TestSeedsKubeProxy(t *testing.T) {
	for _, mode := range []string{kubeproxy.NFTables, kubeproxy.IPTables} {
		t.Run(mode, func(t *testing.T) {
			c, ds := startClusterWith(t, "e2kp-", cluster.Options{Nodes: 1, KubeProxy: mode, KubeProxyMinSync: kubeProxyLag})
			for _, tc := range []struct {
				mode      string
				args      []string
				diagnosis string
			}{
				{workload.ModeNaive, nil, correlate.DiagListenerClosedEarly},
				{workload.ModeProtocol, []string{"--drain-delay=1500ms"}, correlate.DiagClean},
			} {
				t.Run(tc.mode, func(t *testing.T) { seedsKubeProxy(t, c, ds, tc.mode, tc.args, tc.diagnosis) })
			}
		})
	}
}

func seedsKubeProxy(t *testing.T, c *cluster.Cluster, ds []*nodeDaemon, mode string, args []string, diagnosis string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := unique("e2e-kp-" + mode)
	pods := deploy(ctx, t, c, ns, cluster.ServerDeployment(ns, "web", mode, 2, args...))
	waitWatching(ctx, t, ds, pods)
	kp := c.KubeProxies[0]
	service := readyService(ctx, t, c, ns, "web", len(pods))
	victim := &pods[0]
	podAddr := cluster.PodAddr(victim, cluster.ServerPort)

	before := syncNow(ctx, t, c, kp, ns)
	rec := kp.RecordSyncs(ctx)
	res, err := client.Seeds{Dial: kp.Dial, Target: service, Pod: podAddr,
		Stop: func(ctx context.Context) error { return c.DeletePod(ctx, victim.Namespace, victim.Name) }}.Run(ctx)
	if err != nil {
		rec.Stop()
		t.Fatal(err)
	}
	programmed, err := kp.WaitProgrammed(ctx, before)
	syncs := append(rec.Stop(), programmed.LastSync)
	if err != nil {
		t.Fatal(err)
	}
	// The first sync after the delete took the victim out of the rules: a
	// connection can only have been DNATed to it if it started before.
	removed := kubeproxy.FirstSyncAfter(syncs, res.StopAt)
	for _, r := range res.Work {
		if r.Outcome == client.Refused && !r.Start.Before(removed) {
			t.Errorf("/work refused through the Service at %v, after kube-proxy removed the victim at %v",
				r.Start.Sub(res.StopAt), removed.Sub(res.StopAt))
		}
	}
	got := waitComplete(ctx, t, daemonOf(t, ds, victim), string(victim.UID))
	viaService := lab.RefusedTo(service, res.Work)
	direct := lab.RefusedTo(podAddr, res.Readiness, []client.Request{res.Slow})
	t.Logf("%s via %s %s: /work %s; /ready %s; kube-proxy on %s routed to the victim until %v after the delete (network programming: %d changes, %v in all); drainwatch %+v, diagnoses %v",
		mode, kp.Mode(), service, client.Summarize(res.Work), client.Summarize(res.Readiness),
		kp.Node(), removed.Sub(res.StopAt).Round(time.Millisecond), programmed.Programmed, programmed.ProgrammedSum, got.Counts, codes(got))
	if got.Counts.RefusedAfterSigterm != viaService+direct || got.Counts.RefusedBeforeSigterm != 0 {
		dumpRefused(t, got, res.StopAt, res.Work, res.Readiness, []client.Request{res.Slow})
		t.Errorf("refused after/before the stop signal %d/%d, clients saw %d refused (%d through the Service, %d at the pod)",
			got.Counts.RefusedAfterSigterm, got.Counts.RefusedBeforeSigterm, viaService+direct, viaService, direct)
	}
	if mode == workload.ModeNaive && viaService == 0 {
		t.Errorf("naive: no refusal through the Service in %v of kube-proxy lag: the seeds' failure was not reproduced", kubeProxyLag)
	}
	if probes := (seedsRun{victim: victim, res: res}).proberRefused(t, c); got.Counts.ProbeRefused != probes {
		t.Errorf("probe_refused %d, the kubelet prober saw %d refused", got.Counts.ProbeRefused, probes)
	}
	if !slices.Contains(codes(got), diagnosis) || got.Partial {
		t.Errorf("diagnoses %v partial %v %v, want %s and not partial", codes(got), got.Partial, got.PartialReasons, diagnosis)
	}
}

// readyService is c.ServiceAddr, failing the test on error.
func readyService(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, name string, ready int) string {
	t.Helper()
	addr, err := c.ServiceAddr(ctx, ns, name, ready)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// syncNow is c.SyncKubeProxy, failing the test on error.
func syncNow(ctx context.Context, t *testing.T, c *cluster.Cluster, kp *kubeproxy.Proxy, ns string) kubeproxy.Metrics {
	t.Helper()
	m, err := c.SyncKubeProxy(ctx, kp, ns)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
