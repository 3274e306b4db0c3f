package promtest

import (
	"reflect"
	"testing"
)

func TestMetricNames(t *testing.T) {
	cases := map[string][]string{
		`sum by (workload, revision) (increase(drainwatch_x_total{namespace=~"$namespace"}[$__rate_interval]))`:              {"drainwatch_x_total"},
		`histogram_quantile(0.95, sum by (le) (rate(a_bucket{le!="+Inf"}[5m]))) / on (instance) group_left (version) b_info`: {"a_bucket", "b_info"},
		`(c_total unless c_total offset 10m) or increase(c_total[10m]) > 0`:                                                  {"c_total"},
		`count(d == 0)`: {"d"},
	}
	for expr, want := range cases {
		if got := MetricNames(expr); !reflect.DeepEqual(got, want) {
			t.Errorf("MetricNames(%s) = %v, want %v", expr, got, want)
		}
	}
}

func TestExportedNames(t *testing.T) {
	names, err := ExportedNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"drainwatch_terminations_total", "drainwatch_connections_refused_after_sigterm_total",
		"drainwatch_requests_killed_by_sigkill_total", "drainwatch_connections_accepted_after_endpoint_removal_total",
		"drainwatch_termination_phase_seconds_bucket", "drainwatch_routing_lag_seconds_count",
		"drainwatch_probe_attached", "drainwatch_kernel_events_total", "drainwatch_kernel_events_lost_total",
		"drainwatch_unattributed_events_total", "drainwatch_build_info", "process_resident_memory_bytes"} {
		if !names[n] {
			t.Errorf("%s is not exported", n)
		}
	}
}
