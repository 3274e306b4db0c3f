package exporter

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/drainwatch/drainwatch/collector"
)

func TestSelfMetrics(t *testing.T) {
	m := NewMetrics(Options{})
	m.SetProbeState("refused", "attached")
	m.SetProbeState("refused", "fallback") // replaces the attached series
	m.SetProbeState("sock_recv", "unavailable")
	m.SetProbeState("sock_state", "attached")
	for range 3 {
		m.CountKernelEvent(collector.EventRefused)
	}
	m.CountKernelEvent(collector.EventAccept)
	m.CountKernelEvent(collector.EventUnknown) // not a label value: ignored
	m.CountUnattributed(collector.EventReset)
	m.AddKernelEventsLost(7)
	m.AddConnectionsUntracked(2)
	m.AddMapEvictions("local_syns", 5)
	want := fmt.Sprintf(`
# HELP drainwatch_build_info Always 1; the labels carry drainwatch's version and the Go version it was built with.
# TYPE drainwatch_build_info gauge
drainwatch_build_info{goversion=%q,version="dev"} 1
# HELP drainwatch_kernel_events_lost_total Kernel events dropped (ring buffer full in BPF, or the correlator's queue full).
# TYPE drainwatch_kernel_events_lost_total counter
drainwatch_kernel_events_lost_total 7
# HELP drainwatch_kernel_connections_untracked_total Accepted connections the kernel could not track because its connection map was full (overlapping terminations are partial with conn_tracking_full).
# TYPE drainwatch_kernel_connections_untracked_total counter
drainwatch_kernel_connections_untracked_total 2
# HELP drainwatch_kernel_map_evictions_total Entries the kernel's LRU maps forgot to make room, by map: local_syns (a node-local connection's source, e.g. a kubelet probe, may then count as a client's) and group_exits (harmless duplicates of an exit may then be reported).
# TYPE drainwatch_kernel_map_evictions_total counter
drainwatch_kernel_map_evictions_total{map="group_exits"} 0
drainwatch_kernel_map_evictions_total{map="local_syns"} 5
# HELP drainwatch_probe_attached 1 when the BPF probe feeds events, 0 when it is unavailable on this kernel; state says how: attached, fallback (a weaker source) or unavailable.
# TYPE drainwatch_probe_attached gauge
drainwatch_probe_attached{probe="refused",state="fallback"} 1
drainwatch_probe_attached{probe="sock_recv",state="unavailable"} 0
drainwatch_probe_attached{probe="sock_state",state="attached"} 1
`, runtime.Version())
	err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"drainwatch_build_info", "drainwatch_kernel_events_lost_total", "drainwatch_kernel_connections_untracked_total",
		"drainwatch_kernel_map_evictions_total", "drainwatch_probe_attached")
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.self.kernelEvents.WithLabelValues("refused")); got != 3 {
		t.Errorf("kernel_events_total{type=refused} = %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.self.unattributed.WithLabelValues("reset")); got != 1 {
		t.Errorf("unattributed_events_total{type=reset} = %v, want 1", got)
	}
	// Every type is pre-created at 0, so rate() works from the first scrape.
	if n := testutil.CollectAndCount(m.self.kernelEvents); n != len(collector.EventTypes()) {
		t.Errorf("%d kernel_events_total series, want %d", n, len(collector.EventTypes()))
	}
}

func BenchmarkCountKernelEvent(b *testing.B) {
	m := NewMetrics(Options{})
	b.ReportAllocs()
	for b.Loop() {
		m.CountKernelEvent(collector.EventAccept)
	}
}
