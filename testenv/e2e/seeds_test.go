package e2e_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// TestSeedsDirect runs the seeds' experiment straight at a pod (no router:
// the client keeps sending for one second after the delete, as a load
// balancer that was not told): every connection the client saw refused is
// one refused_after_sigterm, exactly.
func TestSeedsDirect(t *testing.T) {
	c, ds := startCluster(t, "e2s-", 1)
	for _, tc := range []struct {
		mode      string
		args      []string
		diagnosis string
	}{
		{workload.ModeNaive, nil, correlate.DiagListenerClosedEarly},
		{workload.ModeProtocol, []string{"--drain-delay=1500ms"}, correlate.DiagClean},
		{workload.ModeProtocol, []string{"--drain-delay=0s"}, correlate.DiagListenerClosedEarly},
	} {
		name := tc.mode + map[bool]string{true: "-delay0", false: ""}[slices.Contains(tc.args, "--drain-delay=0s")]
		t.Run(name, func(t *testing.T) { seedsDirect(t, c, ds, name, tc.mode, tc.args, tc.diagnosis) })
	}
}

func seedsDirect(t *testing.T, c *cluster.Cluster, ds []*nodeDaemon, name, mode string, args []string, diagnosis string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := unique("e2e-" + name)
	// Readiness probes stay on, as on every real Deployment: the kubelet
	// keeps probing until the container exits, and its refused probes are
	// probe_refused, never client refusals.
	run := runSeeds(ctx, t, c, ds, ns, cluster.ServerDeployment(ns, "web", mode, 1, args...))
	victim, res, got, want := run.victim, run.res, run.got, run.want
	t.Logf("marks %+v exit %d/%d grace %v", got.Marks, got.ExitCode, got.ExitSignal, got.GracePeriod)
	t.Logf("%s: clients %s (work) + %s (ready); drainwatch %+v, diagnoses %v, partial %v",
		name, client.Summarize(res.Work), client.Summarize(res.Readiness), got.Counts, codes(got), got.PartialReasons)
	if got.Counts.RefusedAfterSigterm != want || got.Counts.RefusedBeforeSigterm != 0 {
		dumpRefused(t, got, res.StopAt, res.Work, res.Readiness, []client.Request{res.Slow})
		t.Errorf("refused after/before SIGTERM = %d/%d, clients saw %d refused",
			got.Counts.RefusedAfterSigterm, got.Counts.RefusedBeforeSigterm, want)
	}
	probes, err := c.ProbeRefusals(victim, res.StopAt)
	if err != nil {
		t.Fatal(err)
	}
	if got.Counts.ProbeRefused != probes {
		t.Errorf("probe_refused %d, the kubelet prober saw %d refused", got.Counts.ProbeRefused, probes)
	}
	if mode == workload.ModeNaive && want < 10 {
		t.Errorf("naive refused only %d: the scenario did not reproduce the seeds' tens", want)
	}
	if !slices.Contains(codes(got), diagnosis) || got.Partial {
		t.Errorf("diagnoses %v partial %v %v, want %s and not partial", codes(got), got.Partial, got.PartialReasons, diagnosis)
	}
}
