package promtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Sample is one element of an instant vector.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Series is one element of a range vector: its labels and the values of
// its points, in time order.
type Series struct {
	Labels map[string]string
	Values []float64
}

// apiResult is one series of a query answer: an instant vector's element
// has Value, a range vector's has Values.
type apiResult struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
	Values [][2]any          `json:"values"`
}

type apiResponse struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		ResultType string      `json:"resultType"`
		Result     []apiResult `json:"result"`
	} `json:"data"`
}

// Query evaluates expr now and returns its instant vector.
func (s *Server) Query(ctx context.Context, expr string) ([]Sample, error) {
	rs, err := s.query(ctx, "query", url.Values{"query": {expr}}, "vector")
	if err != nil {
		return nil, err
	}
	out := make([]Sample, 0, len(rs))
	for _, r := range rs {
		v, err := pointValue(expr, r.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, Sample{Labels: r.Metric, Value: v})
	}
	return out, nil
}

// QueryRange evaluates expr at every step from start to end, as a Grafana
// time-series panel does.
func (s *Server) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Series, error) {
	q := url.Values{"query": {expr}, "start": {unix(start)}, "end": {unix(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	rs, err := s.query(ctx, "query_range", q, "matrix")
	if err != nil {
		return nil, err
	}
	out := make([]Series, 0, len(rs))
	for _, r := range rs {
		se := Series{Labels: r.Metric}
		for _, p := range r.Values {
			v, err := pointValue(expr, p)
			if err != nil {
				return nil, err
			}
			se.Values = append(se.Values, v)
		}
		out = append(out, se)
	}
	return out, nil
}

// query asks Prometheus's HTTP API endpoint (query, query_range) and checks
// the answer's status and result type.
func (s *Server) query(ctx context.Context, endpoint string, q url.Values, resultType string) ([]apiResult, error) {
	expr := q.Get("query")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v1/"+endpoint+"?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("querying %q: %w", expr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("querying %q: %w", expr, err)
	}
	defer resp.Body.Close()
	var ar apiResponse
	if err := json.NewDecoder(resp.Body).Decode(&ar); err != nil {
		return nil, fmt.Errorf("decoding the answer to %q: %w", expr, err)
	}
	if ar.Status != "success" || ar.Data.ResultType != resultType {
		return nil, fmt.Errorf("%s %q: status %s, type %s: %s", endpoint, expr, ar.Status, ar.Data.ResultType, ar.Error)
	}
	return ar.Data.Result, nil
}

// pointValue reads a [time, "value"] pair's value.
func pointValue(expr string, p [2]any) (float64, error) {
	str, _ := p[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return 0, fmt.Errorf("query %q: value %v: %w", expr, p[1], err)
	}
	return v, nil
}

func unix(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64)
}

// QueryWhen polls expr (every scrape interval) until ready accepts its
// result or ctx ends; it returns the last result. Use it to wait for a
// scrape to have happened, then assert exact values on what it returns.
func (s *Server) QueryWhen(ctx context.Context, expr string, ready func([]Sample) bool) ([]Sample, error) {
	for {
		got, err := s.Query(ctx, expr)
		if err == nil && ready(got) {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return got, fmt.Errorf("waiting for %q (last: %v, %v): %w", expr, got, err, ctx.Err())
		case <-time.After(s.interval / 2):
		}
	}
}
