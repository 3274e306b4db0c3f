package kubeproxy

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// A scrape as kube-proxy v1.37.2 in dual-stack mode serves it (trimmed).
const scrapeSample = `# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1.7645e+09
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"} 1.7645000015e+09
# TYPE kubeproxy_sync_proxy_rules_endpoint_changes_total counter
kubeproxy_sync_proxy_rules_endpoint_changes_total 7
# TYPE kubeproxy_sync_proxy_rules_endpoint_changes_pending gauge
kubeproxy_sync_proxy_rules_endpoint_changes_pending 1
# TYPE kubeproxy_sync_proxy_rules_service_changes_total counter
kubeproxy_sync_proxy_rules_service_changes_total 3
# TYPE kubeproxy_network_programming_duration_seconds histogram
kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 2
kubeproxy_network_programming_duration_seconds_sum{ip_family="IPv4"} 1.5
kubeproxy_network_programming_duration_seconds_count{ip_family="IPv4"} 2
kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv6",le="+Inf"} 5
kubeproxy_network_programming_duration_seconds_sum{ip_family="IPv6"} 9
kubeproxy_network_programming_duration_seconds_count{ip_family="IPv6"} 5
`

// TestMetricsOfIPv4Proxier: the IPv4 proxier's sync time and programming
// latencies (the test network's), the change counters as they are.
func TestMetricsOfIPv4Proxier(t *testing.T) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(scrapeSample))
	if err != nil {
		t.Fatal(err)
	}
	got := metricsOf(fams)
	want := Metrics{LastSync: time.Unix(1764500000, 0), EndpointChanges: 7, ServiceChanges: 3,
		EndpointChangesPending: 1, Programmed: 2, ProgrammedSum: 1500 * time.Millisecond}
	if !got.LastSync.Equal(want.LastSync) {
		t.Errorf("LastSync %v, want %v", got.LastSync, want.LastSync)
	}
	got.LastSync = want.LastSync
	if got != want {
		t.Errorf("metrics %+v, want %+v", got, want)
	}
}

func TestFirstSyncAfter(t *testing.T) {
	t0 := time.Unix(100, 0)
	syncs := []time.Time{t0, t0.Add(time.Second), t0.Add(2 * time.Second)}
	if got := FirstSyncAfter(syncs, t0.Add(500*time.Millisecond)); !got.Equal(syncs[1]) {
		t.Errorf("first sync after 0.5 s: %v", got)
	}
	if got := FirstSyncAfter(syncs, t0.Add(2*time.Second)); !got.IsZero() {
		t.Errorf("first sync after the last: %v, want none", got)
	}
}
