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

type queryResponse struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

// Query evaluates expr now and returns its instant vector.
func (s *Server) Query(ctx context.Context, expr string) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v1/query?query="+url.QueryEscape(expr), nil)
	if err != nil {
		return nil, fmt.Errorf("querying %q: %w", expr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("querying %q: %w", expr, err)
	}
	defer resp.Body.Close()
	var qr queryResponse
	if err := json.NewDecoder(resp.Body).Decode(&qr); err != nil {
		return nil, fmt.Errorf("decoding the answer to %q: %w", expr, err)
	}
	if qr.Status != "success" || qr.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %q: status %s, type %s: %s", expr, qr.Status, qr.Data.ResultType, qr.Error)
	}
	out := make([]Sample, 0, len(qr.Data.Result))
	for _, r := range qr.Data.Result {
		str, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("query %q: value %v: %w", expr, r.Value[1], err)
		}
		out = append(out, Sample{Labels: r.Metric, Value: v})
	}
	return out, nil
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
