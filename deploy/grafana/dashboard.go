package grafana

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/bargauge"
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// UID is the dashboard's stable uid (links and provisioning use it).
const UID = "drainwatch-rollouts"

// Dashboard builds the drainwatch dashboard: per workload, what each
// rollout (revision) lost, how long routing and the termination phases
// took, and drainwatch's own health.
func Dashboard() (dashboard.Dashboard, error) {
	b := dashboard.NewDashboardBuilder("drainwatch — traffic lost in pod terminations").
		Uid(UID).
		Tags([]string{"drainwatch", "kubernetes", "rollouts"}).
		Description("Connections refused after the stop signal, requests killed by SIGKILL or at exit and connections reset by the shutdown per rollout, measured in the kernel by drainwatch.").
		Refresh("1m").
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")).
		WithVariable(labelVariable("namespace", `label_values(drainwatch_terminations_total, namespace)`)).
		WithVariable(labelVariable("workload", `label_values(drainwatch_terminations_total{namespace=~"$namespace"}, workload)`)).
		WithVariable(labelVariable("revision", `label_values(drainwatch_terminations_total{namespace=~"$namespace", workload=~"$workload"}, revision)`)).
		WithVariable(labelVariable("node", `label_values(drainwatch_build_info, node)`)).
		Annotation(rollouts())
	b.WithRow(dashboard.NewRowBuilder("Rollouts: traffic lost per revision"))
	b.WithPanel(bars("Connections refused after the stop signal", "Connection attempts answered with ECONNREFUSED after the stop signal: the listener closed before routing stopped sending traffic. Fix: a preStop sleep or drain delay longer than the routing lag.", qRefusedRate, "{{workload}} rev {{revision}}"))
	b.WithPanel(bars("Requests killed by SIGKILL", "Requests in flight when the kubelet sent SIGKILL. Fix: a grace period above preStop + drain + cleanup.", qKilledRate, "{{workload}} rev {{revision}}"))
	b.WithPanel(bars("Requests killed at exit", "Requests in flight when the server exited by anything other than SIGKILL: it died of the stop signal (no handler), exited before its requests finished (a shutdown timeout shorter than the longest request) or crashed. Fix: handle the stop signal (keep serving through the drain delay, then stop accepting and finish in-flight requests), a shutdown timeout above the longest request within the grace period.", qKilledAtExitRate, "{{workload}} rev {{revision}}"))
	b.WithPanel(bars("Connections blackholed", "Connections routing sent after the pod's network was gone: the node dropped them, the clients timed out (no refusal). Fix: keep the pods serving until routing has converged (a preStop sleep longer than the routing lag).", qBlackholedRate, "{{workload}} rev {{revision}}"))
	b.WithPanel(bars("Connections refused inside the pod (sidecars)", "A sidecar's connections to its own pod's application refused over loopback: the application's listener closed while the proxy in front of it (a mesh's, an ambassador) still accepted clients, so each is a client's request the proxy failed (a 502 or 503). Never in the refused counts above. Fix: a preStop sleep on the application container at least as long as the proxy's drain, or native sidecars (the proxy stops after the application).", qRefusedInsideRate, "{{workload}} rev {{revision}}"))
	b.WithPanel(totals("Refused after the stop signal, per revision (retained series)", qRefusedTotal))
	b.WithPanel(totals("Killed by SIGKILL, per revision (retained series)", qKilledTotal))
	b.WithPanel(bars("Terminations by outcome", "Completed terminations: clean, refused, killed, refused_and_killed, blackholed, reset, partial (kernel view incomplete).", qOutcomes, "{{workload}} rev {{revision}} {{outcome}}"))
	b.WithPanel(bars("Accepted after endpoint removal", "Connections accepted after the endpoint became not ready: routing had not converged (evidence for the delay a pod needs, not an error by itself).", qAcceptedLate, "{{workload}} rev {{revision}}"))
	b.WithPanel(bars("Connections reset at shutdown", "Connections the shutdown reset while the process was alive (ECONNRESET or an empty reply at the client): queued when the listener closed, or a request in flight closed unanswered. Fix: close the listener after routing converged, answer in-flight requests before closing.", qResetsRate, "{{workload}} rev {{revision}}"))
	b.WithPanel(bars("Probe connections refused (kubelet)", "Readiness probes of this node's kubelet refused during terminations (probes run until the container exits). Not client traffic: never in the refused counts above.", qProbesRate, "{{workload}} rev {{revision}}"))
	b.WithPanel(bars("Requests reset on reused connections", "Requests a proxy sent on a pooled keep-alive connection the pod's server had already closed, answered with a RST (a 502 at the proxy), during terminations. Fix: keep serving keep-alive connections until routing converged (drain delay), answer with Connection: close during the drain, keep the proxy's idle timeout below the server's.", qReuseRate, "{{workload}} rev {{revision}}"))
	b.WithPanel(bars("Requests reset on reused connections outside terminations", "The same race in steady state, per workload: the server's keep-alive idle timeout is shorter than an upstream pool's. Fix: a server idle timeout longer than every proxy's upstream keep-alive timeout.", qSteadyReuseRate, "{{workload}}"))
	b.WithPanel(bars("Partial terminations by reason", "Terminations whose kernel view is incomplete (never reported clean), by reason: daemon down, events lost, hostNetwork, unbound namespace, stop signal not seen…", qPartialRate, "{{workload}} {{reason}}"))
	b.WithRow(dashboard.NewRowBuilder("Rollouts: the new pods' side"))
	b.WithPanel(bars("New pods: connections refused after Ready", "Client connection attempts a new pod refused after it became Ready (the time the daemon saw it), within the startup window: the readiness probe passed before the server listened on the traffic port. Fix: point the readiness probe at the port that serves the traffic, or add a startupProbe that passes only once it listens.", qRefusedAfterReadyRate, "{{workload}} rev {{revision}}"))
	b.WithPanel(bars("New pods: connections reset after Ready", "Client connections a new pod accepted and then reset within the startup window (a warm-up that drops its first connections, an app behind a sidecar not serving yet).", qResetAfterReadyRate, "{{workload}} rev {{revision}}"))
	b.WithPanel(seconds("New pods: Ready to first accepted connection (last hour)", "How long routing took to send a new pod its first client connection after it became Ready: the other end of the routing lag.",
		query(qReadyToAcceptP95, "p95 {{workload}}"), query(qReadyToAcceptMax, "max {{workload}}")))
	b.WithRow(dashboard.NewRowBuilder("Timing"))
	b.WithPanel(seconds("Routing lag (last hour)", "Last connection attempt minus endpoint not ready: a lower bound of routing convergence. A preStop sleep must exceed it.",
		query(qRoutingLagP95, "p95 {{workload}}"), query(qRoutingLagMax, "max {{workload}}")))
	b.WithPanel(seconds("Termination phases, p95 (last hour)", "prestop: Killing to stop signal; listener_close_delay: stop signal to listener closed; drain: stop signal to exit; grace_used: delete to exit.",
		query(qPhaseP95, "{{workload}} {{phase}}")))
	b.WithPanel(seconds("Termination phases, mean (last hour)", "Mean phase durations.", query(qPhaseMean, "{{workload}} {{phase}}")))
	b.WithRow(dashboard.NewRowBuilder("drainwatch health"))
	b.WithPanel(series("Nodes with a probe not attached", "Terminations on these nodes are partial.", "none", query(qProbesDown, "{{probe}}")))
	b.WithPanel(series("Nodes with the probe attached", "", "none", query(qProbesUp, "{{probe}}")))
	b.WithPanel(series("Kernel events", "Events read from the ring buffers, by type.", "ops", query(qEventsRate, "{{type}}")))
	b.WithPanel(series("Kernel events lost", "Dropped in BPF (ring buffer full) or at the correlator's queue: counts on that node may be low.", "none", query(qEventsLost, "{{instance}}")))
	b.WithPanel(series("Unattributed kernel events", "Events in a watched scope that matched no pod.", "ops", query(qUnattributed, "{{type}}")))
	b.WithPanel(series("Daemon memory", "Resident memory of each drainwatch daemon.", "bytes", query(qMemory, "{{instance}}")))
	b.WithPanel(series("Versions", "Daemons per drainwatch version.", "none", query(qVersions, "{{version}} ({{goversion}})")))
	d, err := b.Build()
	if err != nil {
		return d, fmt.Errorf("building the dashboard: %w", err)
	}
	return d, nil
}

// rollouts annotates the time axis where a revision's first termination
// appears: the start of a rollout away from it.
func rollouts() *dashboard.AnnotationQueryBuilder {
	return dashboard.NewAnnotationQueryBuilder().Name("Rollouts").Datasource(datasource()).Enable(true).
		IconColor("blue").Expr(qRollouts).Step("1m").
		TitleFormat("{{namespace}}/{{workload}} revision {{revision}}: terminations started").
		TagKeys("namespace,workload,revision")
}

func labelVariable(name, q string) *dashboard.QueryVariableBuilder {
	return dashboard.NewQueryVariableBuilder(name).Label(name).
		Query(dashboard.StringOrMap{String: cog.ToPtr(q)}).
		Datasource(datasource()).Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Multi(true).IncludeAll(true).AllValue(".*").Sort(dashboard.VariableSortAlphabeticalAsc)
}

func datasource() common.DataSourceRef {
	return common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}
}

func query(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Expr(expr).LegendFormat(legend).Datasource(datasource())
}

func series(title, desc, unit string, qs ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().Title(title).Description(desc).Unit(unit).Min(0).
		Datasource(datasource()).Height(8).Span(8).NoValue("0").
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).
			DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom)).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending))
	for _, q := range qs {
		p.WithTarget(q)
	}
	return p
}

func seconds(title, desc string, qs ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	return series(title, desc, "s", qs...).Span(12)
}

func bars(title, desc, expr, legend string) *timeseries.PanelBuilder {
	return series(title, desc, "none", query(expr, legend)).DrawStyle(common.GraphDrawStyleBars).FillOpacity(80).Span(12)
}

func totals(title, expr string) *bargauge.PanelBuilder {
	return bargauge.NewPanelBuilder().Title(title).Unit("none").Min(0).Datasource(datasource()).NoValue("0").
		WithTarget(query(expr, "{{workload}} rev {{revision}}").Instant()).
		Orientation(common.VizOrientationHorizontal).DisplayMode(common.BarGaugeDisplayModeGradient).
		Height(8).Span(12)
}
