package exporter

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drainwatch/drainwatch/correlate"
)

var (
	rolloutLabelNames  = []string{"namespace", "workload_kind", "workload", "revision"}
	workloadLabelNames = []string{"namespace", "workload_kind", "workload"}

	terminationsDesc = prometheus.NewDesc("drainwatch_terminations_total",
		"Pod terminations completed on this node, by rollout, outcome ("+strings.Join(correlate.Outcomes(), ", ")+") and cause ("+strings.Join(correlate.Causes(), ", ")+").",
		append(rolloutLabelNames[:4:4], "outcome", "cause"), nil)
	partialDesc = prometheus.NewDesc("drainwatch_terminations_partial_total",
		"Terminations whose kernel view is incomplete, one increment per reason: "+strings.Join(partialReasons, ", ")+".",
		append(workloadLabelNames[:3:3], "reason"), nil)
	phaseDesc = prometheus.NewDesc("drainwatch_termination_phase_seconds",
		"Durations of termination phases: prestop (killing to stop signal), listener_close_delay (stop signal to last listener closed), drain (stop signal to exit), grace_used (delete requested to exit).",
		append(workloadLabelNames[:3:3], "phase"), nil)
	steadyReuseDesc = prometheus.NewDesc("drainwatch_requests_reset_on_reused_connections_outside_terminations_total",
		"Requests reset on reused connections (see drainwatch_requests_reset_on_reused_connections_total) of pods that were not terminating: the server's keep-alive idle timeout is shorter than an upstream pool's.",
		workloadLabelNames, nil)
	readyToFirstAcceptDesc = prometheus.NewDesc("drainwatch_ready_to_first_accept_seconds",
		"New pods: the daemon seeing the pod Ready to its first accepted client connection (how long routing takes to add a pod).",
		workloadLabelNames, nil)
	routingLagDesc = prometheus.NewDesc("drainwatch_routing_lag_seconds",
		"Last connection attempt to a terminating pod minus the time its endpoint became not ready: a lower bound of routing convergence.",
		workloadLabelNames, nil)
)

// rolloutCounters are the per-rollout counters beside terminations_total:
// one row per series, read from the revision's state.
var rolloutCounters = []struct {
	desc *prometheus.Desc
	of   func(rs *revisionState) uint64
}{
	{rolloutDesc("drainwatch_connections_refused_after_sigterm_total",
		"Connection attempts answered with a RST (no socket: ECONNREFUSED at the client) from the stop signal until the pod's network namespace was gone."),
		func(rs *revisionState) uint64 { return rs.refused }},
	{rolloutDesc("drainwatch_requests_killed_by_sigkill_total",
		"Accepted connections with a request in flight torn down because their process died of SIGKILL."),
		func(rs *revisionState) uint64 { return rs.killed }},
	{rolloutDesc("drainwatch_requests_killed_at_exit_total",
		"Accepted connections with a request in flight torn down because their process exited by anything other than SIGKILL: the stop signal's default action (no handler), another fatal signal (a crash), or its own exit before its requests finished (a shutdown timeout shorter than the longest request)."),
		func(rs *revisionState) uint64 { return rs.killedAtExit }},
	{rolloutDesc("drainwatch_connections_blackholed_total",
		"Connection attempts to a terminating pod's address that the node's kernel dropped after the pod's network was gone (a connect timeout or \"no route to host\" at the client), one per client socket, the kubelet's probes excluded; counted where the node's kernel sees the drop (probe blackhole, Linux >= 5.17)."),
		func(rs *revisionState) uint64 { return rs.blackholed }},
	{rolloutDesc("drainwatch_connections_refused_inside_pod_total",
		"Connections a container of a terminating pod made to another over loopback that were refused (a sidecar proxy forwarding to an application whose listener had closed): each a request the proxy failed or retried, never a client's refusal, so never in connections_refused_after_sigterm_total."),
		func(rs *revisionState) uint64 { return rs.refusedInside }},
	{rolloutDesc("drainwatch_connections_accepted_after_endpoint_removal_total",
		"Connections accepted after the pod's endpoint became not ready: routing had not converged yet."),
		func(rs *revisionState) uint64 { return rs.acceptedNR }},
	{rolloutDesc("drainwatch_connections_reset_at_shutdown_total",
		"Connections the shutdown reset while the process was alive (ECONNRESET or an empty reply at the client): accepted connections still queued when the listener closed, handshakes it left half-open, and connections with a request in flight the server closed or reset before answering."),
		func(rs *revisionState) uint64 { return rs.resets }},
	{rolloutDesc("drainwatch_requests_reset_on_reused_connections_total",
		"Requests that arrived on a keep-alive connection the pod's server had already closed (idle timeout, or the shutdown closing idle connections) and were answered with a RST (reasons TCP_ABORT_ON_DATA, TCP_TIMEWAIT_SOCKET): a proxy's pooled connection, a 502 at the proxy. During terminations."),
		func(rs *revisionState) uint64 { return rs.reuse }},
	{rolloutDesc("drainwatch_probe_connections_refused_total",
		"Connection attempts by this node's kubelet (readiness probes) refused during terminations: not client traffic, never in connections_refused_after_sigterm_total."),
		func(rs *revisionState) uint64 { return rs.probes }},
	{rolloutDesc("drainwatch_connections_refused_after_ready_total",
		"Client connection attempts refused (no socket) by new pods in the window after the daemon saw them Ready: the readiness probe passed before what serves the traffic listened."),
		func(rs *revisionState) uint64 { return rs.refusedAfterReady }},
	{rolloutDesc("drainwatch_connections_reset_after_ready_total",
		"Client connections new pods reset in the window after the daemon saw them Ready."),
		func(rs *revisionState) uint64 { return rs.resetAfterReady }},
	{rolloutDesc("drainwatch_connections_refused_before_ready_total",
		"Client connection attempts refused by new pods before the daemon saw them Ready (traffic straight at a pod not Ready yet)."),
		func(rs *revisionState) uint64 { return rs.refusedBeforeReady }},
}

func rolloutDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, rolloutLabelNames, nil)
}

// rolloutCollector exports the per-rollout state of Metrics as const
// metrics, so that expired revisions simply stop being collected.
type rolloutCollector struct{ m *Metrics }

func (c rolloutCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- terminationsDesc
	for _, c := range rolloutCounters {
		ch <- c.desc
	}
	for _, d := range []*prometheus.Desc{partialDesc, phaseDesc, routingLagDesc, steadyReuseDesc, readyToFirstAcceptDesc} {
		ch <- d
	}
}

func (c rolloutCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	for _, rs := range c.m.revisions {
		collectRevision(ch, rs)
	}
	for _, ws := range c.m.workloads {
		collectWorkload(ch, ws)
	}
}

func collectRevision(ch chan<- prometheus.Metric, rs *revisionState) {
	l := rs.labels[:]
	for key, n := range rs.outcomes {
		outcome, cause := splitOutcomeKey(key)
		ch <- prometheus.MustNewConstMetric(terminationsDesc, prometheus.CounterValue, float64(n), append(l[:4:4], outcome, cause)...)
	}
	for _, c := range rolloutCounters {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(c.of(rs)), l...)
	}
}

func collectWorkload(ch chan<- prometheus.Metric, ws *workloadState) {
	l := ws.labels[:]
	for reason, n := range ws.partial {
		ch <- prometheus.MustNewConstMetric(partialDesc, prometheus.CounterValue, float64(n), append(l[:3:3], reason)...)
	}
	for _, phase := range correlate.PhaseNames() {
		if h := ws.phases[phase]; h.count > 0 {
			ch <- h.metric(phaseDesc, append(l[:3:3], phase)...)
		}
	}
	ch <- prometheus.MustNewConstMetric(steadyReuseDesc, prometheus.CounterValue, float64(ws.steadyReuse), l...)
	if ws.routingLag.count > 0 {
		ch <- ws.routingLag.metric(routingLagDesc, l...)
	}
	if ws.readyToFirstAccept.count > 0 {
		ch <- ws.readyToFirstAccept.metric(readyToFirstAcceptDesc, l...)
	}
}
