package kubeproxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is what kube-proxy's own /metrics says about its programming.
type Metrics struct {
	// LastSync is kubeproxy_sync_proxy_rules_last_timestamp_seconds: when
	// the IPv4 rules were last written successfully (zero before the first).
	LastSync time.Time
	// EndpointChanges and ServiceChanges count the changes kube-proxy has
	// received (kubeproxy_sync_proxy_rules_{endpoint,service}_changes_total);
	// the Pending ones are received but not yet programmed.
	EndpointChanges, ServiceChanges               float64
	EndpointChangesPending, ServiceChangesPending float64
	// Programmed counts the EndpointSlice changes whose network programming
	// latency kube-proxy observed (kubeproxy_network_programming_duration_seconds:
	// from the change's trigger time in the API to its rules synced), with
	// the sum of those latencies.
	Programmed    uint64
	ProgrammedSum time.Duration
}

// Metrics scrapes kube-proxy's metrics endpoint on the node namespace's
// loopback.
func (p *Proxy) Metrics(ctx context.Context) (Metrics, error) {
	fams, err := p.scrape(ctx)
	if err != nil {
		return Metrics{}, err
	}
	return metricsOf(fams), nil
}

func metricsOf(fams map[string]*dto.MetricFamily) Metrics {
	var m Metrics
	if ts := maxValue(ipv4(fams["kubeproxy_sync_proxy_rules_last_timestamp_seconds"])); ts > 0 {
		sec, frac := math.Modf(ts)
		m.LastSync = time.Unix(int64(sec), int64(frac*1e9))
	}
	m.EndpointChanges = maxValue(fams["kubeproxy_sync_proxy_rules_endpoint_changes_total"])
	m.ServiceChanges = maxValue(fams["kubeproxy_sync_proxy_rules_service_changes_total"])
	m.EndpointChangesPending = maxValue(fams["kubeproxy_sync_proxy_rules_endpoint_changes_pending"])
	m.ServiceChangesPending = maxValue(fams["kubeproxy_sync_proxy_rules_service_changes_pending"])
	if f := ipv4(fams["kubeproxy_network_programming_duration_seconds"]); f != nil {
		for _, s := range f.GetMetric() {
			m.Programmed += s.GetHistogram().GetSampleCount()
			m.ProgrammedSum += time.Duration(s.GetHistogram().GetSampleSum() * float64(time.Second))
		}
	}
	return m
}

func (p *Proxy) scrape(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	body, err := p.get(ctx, MetricsPort, "/metrics")
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(body)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy %s: parsing metrics: %w", p.cfg.Node, err)
	}
	return fams, nil
}

// get fetches http://127.0.0.1:<port><path> from inside the node namespace.
func (p *Proxy) get(ctx context.Context, port int, path string) (io.Reader, error) {
	tr := &http.Transport{DialContext: p.cfg.NS.DialContext, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", port, path), nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy %s: GET %s: %w", p.cfg.Node, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy %s: reading %s: %w", p.cfg.Node, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("kube-proxy %s: GET %s: %s: %s", p.cfg.Node, path, resp.Status, b)
	}
	return bytes.NewReader(b), nil
}

// ipv4 keeps the family's series of the IPv4 proxier. kube-proxy runs one
// per IP family (dual-stack mode, as the node namespace has IPv6 on its
// loopback) and both sync on every change; the test network is IPv4 only,
// so the IPv4 proxier's sync is the one that takes effect.
func ipv4(f *dto.MetricFamily) *dto.MetricFamily {
	if f == nil {
		return nil
	}
	out := &dto.MetricFamily{Name: f.Name, Type: f.Type}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "ip_family" && l.GetValue() == "IPv4" {
				out.Metric = append(out.Metric, m)
			}
		}
	}
	return out
}

// maxValue is the largest gauge or counter value of a family, 0 when absent.
func maxValue(f *dto.MetricFamily) float64 {
	var v float64
	for _, m := range f.GetMetric() {
		if g := m.GetGauge(); g != nil {
			v = max(v, g.GetValue())
		}
		if c := m.GetCounter(); c != nil {
			v = max(v, c.GetValue())
		}
	}
	return v
}
