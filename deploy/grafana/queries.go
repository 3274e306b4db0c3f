package grafana

// Selectors shared by the per-workload panels: the dashboard's namespace,
// workload, revision and node variables. node is the PodMonitor's target
// label (the daemon's node); where a Prometheus scrapes without it, "All"
// (.*) still matches the series that lack it.
const sel = `namespace=~"$namespace", workload=~"$workload", revision=~"$revision", node=~"$node"`

// wsel is sel for the per-workload metrics that have no revision label
// (partial terminations, routing lag, phase histograms): revision=~"3" would
// match none of their series, so a selected revision blanked their panels.
const wsel = `namespace=~"$namespace", workload=~"$workload", node=~"$node"`

// nodeSel selects the daemons of the node variable.
const nodeSel = `node=~"$node"`

// Per-rollout queries. Counters of a revision are summed over nodes; the
// revision is the rollout identity, so "per revision" reads "per rollout".
var (
	qRefusedRate = `sum by (workload, revision) (increase(drainwatch_connections_refused_after_sigterm_total{` + sel + `}[$__rate_interval]))`
	qKilledRate  = `sum by (workload, revision) (increase(drainwatch_requests_killed_by_sigkill_total{` + sel + `}[$__rate_interval]))`
	// qKilledAtExitRate: requests killed in flight by an exit other than
	// SIGKILL's (no handler for the stop signal, a shutdown timeout shorter
	// than the longest request, a crash).
	qKilledAtExitRate = `sum by (workload, revision) (increase(drainwatch_requests_killed_at_exit_total{` + sel + `}[$__rate_interval]))`
	// qBlackholedRate: connections sent after the pods' network was gone.
	qBlackholedRate = `sum by (workload, revision) (increase(drainwatch_connections_blackholed_total{` + sel + `}[$__rate_interval]))`
	// qRefusedInsideRate: a sidecar's forwards refused by its own pod's
	// application over loopback (the app's listener closed while the proxy
	// still took clients): each is a client's request failed by the proxy.
	qRefusedInsideRate = `sum by (workload, revision) (increase(drainwatch_connections_refused_inside_pod_total{` + sel + `}[$__rate_interval]))`
	qRefusedTotal      = `sum by (workload, revision) (drainwatch_connections_refused_after_sigterm_total{` + sel + `})`
	qKilledTotal       = `sum by (workload, revision) (drainwatch_requests_killed_by_sigkill_total{` + sel + `})`
	qOutcomes          = `sum by (workload, revision, outcome) (increase(drainwatch_terminations_total{` + sel + `}[$__rate_interval]))`
	qAcceptedLate      = `sum by (workload, revision) (increase(drainwatch_connections_accepted_after_endpoint_removal_total{` + sel + `}[$__rate_interval]))`
	qResetsRate        = `sum by (workload, revision) (increase(drainwatch_connections_reset_at_shutdown_total{` + sel + `}[$__rate_interval]))`
	qReuseRate         = `sum by (workload, revision) (increase(drainwatch_requests_reset_on_reused_connections_total{` + sel + `}[$__rate_interval]))`
	qProbesRate        = `sum by (workload, revision) (increase(drainwatch_probe_connections_refused_total{` + sel + `}[$__rate_interval]))`
	qPartialRate       = `sum by (workload, reason) (increase(drainwatch_terminations_partial_total{` + wsel + `}[$__rate_interval]))`
	// The new pods' side: refused and reset within the startup window.
	qRefusedAfterReadyRate = `sum by (workload, revision) (increase(drainwatch_connections_refused_after_ready_total{` + sel + `}[$__rate_interval]))`
	qResetAfterReadyRate   = `sum by (workload, revision) (increase(drainwatch_connections_reset_after_ready_total{` + sel + `}[$__rate_interval]))`
	// Outside terminations the count is per workload (no revision label).
	qSteadyReuseRate = `sum by (workload) (increase(drainwatch_requests_reset_on_reused_connections_outside_terminations_total{` + wsel + `}[$__rate_interval]))`
)

// Timing queries. Terminations are rare events: quantiles over an hour of
// them say more than per-scrape rates.
var (
	qRoutingLagP95 = `histogram_quantile(0.95, sum by (workload, le) (increase(drainwatch_routing_lag_seconds_bucket{` + wsel + `}[1h])))`
	qRoutingLagMax = `histogram_quantile(1, sum by (workload, le) (increase(drainwatch_routing_lag_seconds_bucket{` + wsel + `}[1h])))`
	qPhaseP95      = `histogram_quantile(0.95, sum by (workload, phase, le) (increase(drainwatch_termination_phase_seconds_bucket{` + wsel + `}[1h])))`
	// qReadyToAccept*: new pods' Ready to first accepted connection.
	qReadyToAcceptP95 = `histogram_quantile(0.95, sum by (workload, le) (increase(drainwatch_ready_to_first_accept_seconds_bucket{` + wsel + `}[1h])))`
	qReadyToAcceptMax = `histogram_quantile(1, sum by (workload, le) (increase(drainwatch_ready_to_first_accept_seconds_bucket{` + wsel + `}[1h])))`
	qPhaseMean        = `sum by (workload, phase) (increase(drainwatch_termination_phase_seconds_sum{` + wsel + `}[1h])) / sum by (workload, phase) (increase(drainwatch_termination_phase_seconds_count{` + wsel + `}[1h]))`
)

// drainwatch's own health.
var (
	qProbesDown   = `count by (probe) (drainwatch_probe_attached{` + nodeSel + `} == 0)`
	qProbesUp     = `sum by (probe) (drainwatch_probe_attached{` + nodeSel + `})`
	qEventsRate   = `sum by (type) (rate(drainwatch_kernel_events_total{` + nodeSel + `}[$__rate_interval]))`
	qEventsLost   = `sum by (instance) (increase(drainwatch_kernel_events_lost_total{` + nodeSel + `}[$__rate_interval]))`
	qUnattributed = `sum by (type) (rate(drainwatch_unattributed_events_total{` + nodeSel + `}[$__rate_interval]))`
	qVersions     = `count by (version, goversion) (drainwatch_build_info{` + nodeSel + `})`
	qMemory       = `max by (instance) (process_resident_memory_bytes * on (instance, job) group_left () drainwatch_build_info{` + nodeSel + `})`
)

// qRollouts marks a rollout on the time axis: the first termination of a
// revision (its terminations counter is born), i.e. when pods of that
// revision started being replaced or removed.
var (
	qRollouts = `count by (namespace, workload, revision) (drainwatch_terminations_total{namespace=~"$namespace", workload=~"$workload"})` +
		` unless count by (namespace, workload, revision) (drainwatch_terminations_total{namespace=~"$namespace", workload=~"$workload"} offset 2m)`
)
