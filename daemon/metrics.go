package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/exporter/otlp"
)

// daemonMetrics are the collectors the daemon adds to the exporter's
// registry: the state file's, and the Events not posted.
type daemonMetrics struct {
	state stateMetrics
	// eventsDropped is nil when Events are off (Config.NoEvents).
	eventsDropped *prometheus.CounterVec
	// otlp is nil when the OTLP exporter is off (Config.OTLP).
	otlp *otlp.Metrics
}

// collectors are the daemon's own collectors, as registered.
func (dm daemonMetrics) collectors() []prometheus.Collector {
	cs := []prometheus.Collector{dm.state.resets, dm.state.failures}
	if dm.eventsDropped != nil {
		cs = append(cs, dm.eventsDropped)
	}
	if dm.otlp != nil {
		cs = append(cs, dm.otlp.Collectors()...)
	}
	return cs
}

// newMetrics builds every collector `drainwatch run` serves on /metrics:
// the exporter's (per rollout, the daemon's health, Go and process) and
// the daemon's own, all registered here. New and MetricsReference both
// call it, so the metrics reference lists what the daemon serves.
func newMetrics(opts exporter.Options, events, otlpOn bool) (*exporter.Metrics, daemonMetrics) {
	m := exporter.NewMetrics(opts)
	dm := daemonMetrics{state: newStateMetrics(m.Registry())}
	if events {
		dm.eventsDropped = exporter.NewEventsDropped()
		m.Registry().MustRegister(dm.eventsDropped)
	}
	if otlpOn {
		om := otlp.NewMetrics()
		dm.otlp = &om
		m.Registry().MustRegister(om.Collectors()...)
	}
	return m, dm
}

// MetricsReference returns the metrics of a daemon with the default
// configuration (Events on) and the OTLP exporter on, built as New builds them, and the collectors
// the daemon registers beside the exporter's. tools/docgen writes the
// metrics reference (docs/metrics.md) from them.
func MetricsReference() (*exporter.Metrics, []prometheus.Collector) {
	m, dm := newMetrics(exporter.Options{}, true, true)
	return m, dm.collectors()
}
