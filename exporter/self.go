package exporter

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/drainwatch/drainwatch/collector"
)

// lruMaps are the kernel's LRU maps (bpf/drainwatch.h), the label values
// of drainwatch_kernel_map_evictions_total.
var lruMaps = []string{"local_syns", "group_exits"}

// selfMetrics are drainwatch's own health: which probes are attached and
// what happened to the kernel events.
type selfMetrics struct {
	probeAttached *prometheus.GaugeVec
	kernelEvents  *prometheus.CounterVec
	unattributed  *prometheus.CounterVec
	lost          prometheus.Counter
	untracked     prometheus.Counter
	evicted       *prometheus.CounterVec
	throttled     prometheus.Counter
	buildInfo     *prometheus.GaugeVec
	// Per-type counters resolved once, so counting an event on the reader's
	// hot path is an array index and an atomic add, no allocation.
	kernelByType       []prometheus.Counter
	unattributedByType []prometheus.Counter
}

func newSelfMetrics() *selfMetrics {
	s := &selfMetrics{
		probeAttached: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "drainwatch_probe_attached",
			Help: "1 when the BPF probe feeds events, 0 when it is unavailable on this kernel; state says how: attached, fallback (a weaker source) or unavailable."},
			[]string{"probe", "state"}),
		kernelEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drainwatch_kernel_events_total",
			Help: "Kernel events received from the ring buffer, by type."}, []string{"type"}),
		unattributed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drainwatch_unattributed_events_total",
			Help: "Kernel events in a watched scope that could not be attributed to a pod, by type."}, []string{"type"}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{Name: "drainwatch_kernel_events_lost_total",
			Help: "Kernel events dropped (ring buffer full in BPF, or the correlator's queue full)."}),
		untracked: prometheus.NewCounter(prometheus.CounterOpts{Name: "drainwatch_kernel_connections_untracked_total",
			Help: "Accepted connections the kernel could not track because its connection map was full (overlapping terminations are partial with conn_tracking_full)."}),
		evicted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drainwatch_kernel_map_evictions_total",
			Help: "Entries the kernel's LRU maps forgot to make room, by map: local_syns (a node-local connection's source, e.g. a kubelet probe, may then count as a client's) and group_exits (harmless duplicates of an exit may then be reported)."},
			[]string{"map"}),
		throttled: prometheus.NewCounter(prometheus.CounterOpts{Name: "drainwatch_api_lists_throttled_total",
			Help: "Requests for /api/v1/terminations or /ui answered 429 (Retry-After) because as many lists as the daemon builds at once were being served."}),
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "drainwatch_build_info",
			Help: "Always 1; the labels carry drainwatch's version and the Go version it was built with."}, []string{"version", "goversion"}),
	}
	s.buildInfo.WithLabelValues(Version, runtime.Version()).Set(1)
	for _, name := range lruMaps {
		s.evicted.WithLabelValues(name) // at 0 from the first scrape
	}
	types := collector.EventTypes()
	maxType := types[len(types)-1]
	s.kernelByType = make([]prometheus.Counter, maxType+1)
	s.unattributedByType = make([]prometheus.Counter, maxType+1)
	for _, t := range types {
		s.kernelByType[t] = s.kernelEvents.WithLabelValues(t.String())
		s.unattributedByType[t] = s.unattributed.WithLabelValues(t.String())
	}
	return s
}

func (s *selfMetrics) register(r *prometheus.Registry) {
	r.MustRegister(s.probeAttached, s.kernelEvents, s.unattributed, s.lost, s.untracked, s.evicted, s.throttled, s.buildInfo,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// ProbeUnavailable is the probe state of a probe that feeds no events
// (collector/kernel.ProbeUnavailable).
const ProbeUnavailable = "unavailable"

// SetProbeState records the named probe's state (attached, fallback,
// unavailable): one series per probe, 1 unless it is unavailable, so
// `drainwatch_probe_attached == 0` still finds the missing ones.
func (m *Metrics) SetProbeState(probe, state string) {
	m.self.probeAttached.DeletePartialMatch(prometheus.Labels{"probe": probe})
	v := 1.0
	if state == ProbeUnavailable {
		v = 0
	}
	m.self.probeAttached.WithLabelValues(probe, state).Set(v)
}

// CountKernelEvent counts one kernel event of type t (unknown types are
// ignored to keep the label set fixed). It does not allocate.
func (m *Metrics) CountKernelEvent(t collector.EventType) {
	if int(t) < len(m.self.kernelByType) && m.self.kernelByType[t] != nil {
		m.self.kernelByType[t].Inc()
	}
}

// CountUnattributed counts one kernel event that matched no pod.
func (m *Metrics) CountUnattributed(t collector.EventType) {
	if int(t) < len(m.self.unattributedByType) && m.self.unattributedByType[t] != nil {
		m.self.unattributedByType[t].Inc()
	}
}

// AddKernelEventsLost adds n lost kernel events (BPF reserve failures read
// from the per-CPU counter, or drops at the correlator's queue).
func (m *Metrics) AddKernelEventsLost(n uint64) {
	m.self.lost.Add(float64(n))
}

// AddConnectionsUntracked adds n accepted connections the kernel could not
// track (its connection map was full: the map's overflow counter).
func (m *Metrics) AddConnectionsUntracked(n uint64) {
	m.self.untracked.Add(float64(n))
}

// AddMapEvictions adds n entries evicted from the named LRU map.
func (m *Metrics) AddMapEvictions(name string, n uint64) {
	m.self.evicted.WithLabelValues(name).Add(float64(n))
}
