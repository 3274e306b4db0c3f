package scale

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// serverMetrics is what the API server reports about its watches, summed
// over the resources the daemons read.
type serverMetrics struct {
	// watchEvents and watchBytes by resource: every event sent on every
	// watch stream (apiserver_watch_events_total, the _sum of
	// apiserver_watch_events_sizes).
	watchEvents, watchBytes map[string]float64
	// longrunningWatches is apiserver_longrunning_requests{verb="WATCH"}
	// summed: watch requests being served now.
	longrunningWatches float64
	// watchesByResource splits longrunningWatches by resource.
	watchesByResource map[string]float64
}

func scrape(ctx context.Context, c kubernetes.Interface) (serverMetrics, error) {
	body, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return serverMetrics{}, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	m := serverMetrics{watchEvents: map[string]float64{}, watchBytes: map[string]float64{}, watchesByResource: map[string]float64{}}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m.add(sc.Text())
	}
	return m, sc.Err()
}

// add takes one sample line of the text format.
func (m *serverMetrics) add(line string) {
	name, labels, value, ok := parseSample(line)
	if !ok {
		return
	}
	switch name {
	case "apiserver_watch_events_total":
		m.watchEvents[resourceLabel(labels)] += value
	case "apiserver_watch_events_sizes_sum":
		m.watchBytes[resourceLabel(labels)] += value
	case "apiserver_longrunning_requests":
		if labels["verb"] == "WATCH" {
			m.longrunningWatches += value
			m.watchesByResource[labels["resource"]] += value
		}
	}
}

// resourceLabel is the resource's plural name: newer API servers label
// watch metrics with resource, older ones with kind.
func resourceLabel(l map[string]string) string {
	if r := l["resource"]; r != "" {
		return r
	}
	return strings.ToLower(l["kind"]) + "s"
}

// parseSample splits `name{a="b",c="d"} value`; label values here hold no
// commas or quotes.
func parseSample(line string) (string, map[string]string, float64, bool) {
	if line == "" || line[0] == '#' {
		return "", nil, 0, false
	}
	sp := strings.LastIndexByte(line, ' ')
	if sp < 0 {
		return "", nil, 0, false
	}
	value, err := strconv.ParseFloat(line[sp+1:], 64)
	if err != nil {
		return "", nil, 0, false
	}
	head := line[:sp]
	labels := map[string]string{}
	name := head
	if i := strings.IndexByte(head, '{'); i >= 0 {
		name = head[:i]
		for _, kv := range strings.Split(strings.TrimSuffix(head[i+1:], "}"), ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				labels[k] = strings.Trim(v, `"`)
			}
		}
	}
	return name, labels, value, true
}

// minus is the change since an earlier scrape (counters only).
func (m serverMetrics) minus(before serverMetrics) serverMetrics {
	d := serverMetrics{watchEvents: map[string]float64{}, watchBytes: map[string]float64{}}
	for k, v := range m.watchEvents {
		d.watchEvents[k] = v - before.watchEvents[k]
	}
	for k, v := range m.watchBytes {
		d.watchBytes[k] = v - before.watchBytes[k]
	}
	return d
}
