package e2e_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// The keep-alive race: the pods' server closes connections idle for
// serverIdle, the clients' pools reuse them every poolEvery (an upstream
// whose idle timeout is longer than the server's). Every reuse after the
// first request of a connection meets a connection the server closed.
const (
	serverIdle = 200 * time.Millisecond
	poolEvery  = 500 * time.Millisecond
	// poolConns per pod, their requests spread over poolEvery (the pool
	// staggers them): at any stop signal, the connections used within the
	// last serverIdle (about 3 of 8) are open, and the stop signal closes
	// them under the pool.
	poolConns   = 8
	steadyFor   = 2 * time.Second
	poolRunsFor = 40 * time.Second
)

// TestResetsOnReusedConnections: a Deployment of 2 pods whose server closes
// idle keep-alive connections after 200 ms and, at its stop signal, turns
// keep-alives off (closing the idle connections at once) and serves 1 s
// more (protocol mode, drain delay 1 s), each pod with a client
// pool of 8 connections that sends on each every 500 ms and never retries
// (so each request lost on a reused connection is one client error: EOF
// after the server's FIN, the RST being the kernel's answer to the request).
// Steady state for 2 s, then `kubectl rollout restart`: the pools reuse the
// connections the stop signal closed while the pod still answers (a RST
// each), then honour the drain's `Connection: close` until the pods refuse
// new connections.
//
// drainwatch's requests reset on reused connections — the old pods'
// terminations plus the workload's count outside terminations — equal the
// clients' resets on reused connections exactly; those after each pod's
// stop signal are its termination's; none is a reset at shutdown.
func TestResetsOnReusedConnections(t *testing.T) {
	c, ds := startCluster(t, "e2k-", 1)
	d := ds[0]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := unique("e2e-reuse")
	dep := cluster.ServerDeployment(ns, "web", workload.ModeProtocol, 2, "--idle-timeout="+serverIdle.String(), "--drain-delay=1s")
	dep.Spec.Strategy = oneAtATime()
	old := deploy(ctx, t, c, ns, dep)
	waitWatching(ctx, t, ds, old)
	done := make(chan []client.Request, len(old))
	for i := range old {
		pool := client.KeepAlive{Dial: c.Dial, Target: cluster.PodAddr(&old[i], cluster.ServerPort), Path: "/work",
			Conns: poolConns, Interval: poolEvery, Count: int(poolRunsFor / poolEvery), Duration: poolRunsFor, Timeout: time.Second}
		go func() { done <- pool.Run(ctx) }()
	}
	time.Sleep(steadyFor)
	if _, err := c.Kubectl(ctx, "-n", ns, "rollout", "restart", "deployment/web"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitRolledOut(ctx, ns, "web"); err != nil {
		t.Fatal(err)
	}
	var reqs []client.Request
	for range old {
		reqs = append(reqs, <-done...)
	}
	clientTotal, drainwatchTotal, afterTotal := 0, 0, 0
	for i := range old {
		p := &old[i]
		got := waitComplete(ctx, t, d, string(p.UID))
		addr := cluster.PodAddr(p, cluster.ServerPort)
		all, after, resets := clientResets(reqs, addr, got)
		clientTotal += all
		afterTotal += after
		drainwatchTotal += got.Counts.RequestsResetOnReusedConnections
		t.Logf("%s: clients %s; reset on reuse %d (%d after the stop signal), drainwatch %d (%d after; %v), reset at shutdown %d; diagnoses %v",
			p.Name, client.Summarize(requestsTo(reqs, addr)), all, after, got.Counts.RequestsResetOnReusedConnections,
			got.ReuseResets.AfterStopSignal, got.ReuseResets.Reasons, got.Counts.ConnectionsResetAtShutdown, codes(got))
		if got.ReuseResets.AfterStopSignal != after {
			t.Errorf("%s: drainwatch counted %d resets on reuse after the stop signal, the clients saw %d", p.Name, got.ReuseResets.AfterStopSignal, after)
		}
		t.Logf("%s: clients saw %d ECONNRESET; drainwatch %d reset at shutdown", p.Name, resets, got.Counts.ConnectionsResetAtShutdown)
		if after > 0 && diagnosis(got, correlate.DiagResetOnReuse) == "" {
			t.Errorf("%s: diagnoses %v, want %s", p.Name, codes(got), correlate.DiagResetOnReuse)
		}
	}
	// The steady count reaches the metrics at the daemon's next tick.
	steady := 0
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		steady = steadyReuse(d, ns, "web")
		return steady+drainwatchTotal >= clientTotal, nil
	})
	t.Logf("clients: %d requests reset on reused connections; drainwatch: %d in terminations + %d outside = %d",
		clientTotal, drainwatchTotal, steady, drainwatchTotal+steady)
	if drainwatchTotal+steady != clientTotal {
		t.Errorf("drainwatch counted %d requests reset on reused connections (%d in terminations, %d outside), the clients saw %d",
			drainwatchTotal+steady, drainwatchTotal, steady, clientTotal)
	}
	if afterTotal == 0 {
		t.Errorf("no reset on reuse after a stop signal: the scenario proves nothing about terminations")
	}
	if steady == 0 {
		t.Errorf("no reset on reuse outside terminations in %v of steady state: the scenario proves nothing about it", steadyFor)
	}
}

// clientResets counts the clients' requests to addr lost on reused
// connections (all, and those sent at or after the termination's stop
// signal) and their ECONNRESETs on any connection.
func clientResets(reqs []client.Request, addr string, got correlate.Termination) (all, after, resets int) {
	stop := got.Marks.StopSignal
	for _, r := range requestsTo(reqs, addr) {
		if client.ResetOnReuse(r) {
			all++
			if !stop.IsZero() && !r.Start.Before(stop) {
				after++
			}
		}
		if r.Outcome == client.Reset {
			resets++
		}
	}
	return all, after, resets
}

func requestsTo(reqs []client.Request, addr string) []client.Request {
	var out []client.Request
	for _, r := range reqs {
		if r.Target == addr {
			out = append(out, r)
		}
	}
	return out
}

func diagnosis(t correlate.Termination, code string) string {
	for _, d := range t.Diagnoses {
		if d.Code == code {
			return d.Message
		}
	}
	return ""
}

// steadyReuse reads the workload's requests reset on reused connections
// outside terminations from the daemon's metrics.
func steadyReuse(d *nodeDaemon, ns, name string) int {
	mfs, err := d.Metrics().Registry().Gather()
	if err != nil {
		return -1
	}
	for _, mf := range mfs {
		if mf.GetName() != "drainwatch_requests_reset_on_reused_connections_outside_terminations_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == ns && labels["workload"] == name {
				return int(m.GetCounter().GetValue())
			}
		}
	}
	return 0
}
