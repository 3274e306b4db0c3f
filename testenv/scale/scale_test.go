package scale

import (
	"strings"
	"testing"
)

func TestResourceIndex(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/pods":                         "pods",
		"/api/v1/namespaces/scale-00/services": "services",
		"/apis/discovery.k8s.io/v1/namespaces/scale-01/endpointslices":            "endpointslices",
		"/api/v1/namespaces/scale-00/events":                                      "events",
		"/apis/apps/v1/namespaces/scale-00/replicasets/app-00-5d8f":               "replicasets",
		"/api/v1/namespaces/scale-00/pods/app-00-5d8f-abcde":                      "pods",
		"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/hollow-1": "other",
	} {
		if got := resources[resourceIndex(path)]; got != want {
			t.Errorf("resourceIndex(%s) = %s, want %s", path, got, want)
		}
	}
}

func TestServerMetricsAdd(t *testing.T) {
	m := serverMetrics{watchEvents: map[string]float64{}, watchBytes: map[string]float64{}, watchesByResource: map[string]float64{}}
	for _, line := range strings.Split(`# HELP apiserver_watch_events_total [BETA] Number of events sent in watch clients
apiserver_watch_events_total{group="",resource="pods",version="v1"} 5200
apiserver_watch_events_total{group="discovery.k8s.io",resource="endpointslices",version="v1"} 842
apiserver_watch_events_sizes_sum{group="",resource="pods",version="v1"} 1.2e+07
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 3
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 2
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="log",verb="GET",version="v1"} 7`, "\n") {
		m.add(line)
	}
	if m.watchEvents["pods"] != 5200 || m.watchEvents["endpointslices"] != 842 || m.watchBytes["pods"] != 1.2e7 {
		t.Errorf("events %v bytes %v", m.watchEvents, m.watchBytes)
	}
	if m.longrunningWatches != 5 || m.watchesByResource["pods"] != 5 {
		t.Errorf("watches %v by resource %v, want 5", m.longrunningWatches, m.watchesByResource)
	}
}

// Scoped grows with the node's pods (10 -> 110: x11), naive's slices and
// Events with the cluster's (2,000 -> 550,000: x275).
func TestExtrapolation(t *testing.T) {
	r := Report{Config: Config{Nodes: 200, Namespaces: 4, DeploymentsPerNamespace: 5}, Pods: 2000, Results: []Result{
		{Design: Scoped, Daemons: 200, During: ClientCost{BodyBytes: [6]uint64{200 << 20, 0, 400 << 20, 0, 0, 0}}},
		{Design: Naive, Daemons: 200, During: ClientCost{BodyBytes: [6]uint64{200 << 20, 0, 400 << 20, 200 << 20, 0, 0}}},
	}}
	text := r.Extrapolation()
	for _, want := range []string{
		"scoped           all   33.0   161.1", // (1 + 2) MiB x 11
		"naive            all  836.0  4082.0", // 1 x 11 + (2 + 1) x 275 MiB
	} {
		if !strings.Contains(strings.Join(strings.Fields(text), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("extrapolation lacks %q:\n%s", want, text)
		}
	}
}
