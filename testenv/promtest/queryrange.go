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

// Series is one element of a range vector: its labels and the values of
// its points, in time order.
type Series struct {
	Labels map[string]string
	Values []float64
}

type rangeResponse struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	} `json:"data"`
}

// QueryRange evaluates expr at every step from start to end, as a Grafana
// time-series panel does.
func (s *Server) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Series, error) {
	q := url.Values{"query": {expr}, "start": {unix(start)}, "end": {unix(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v1/query_range?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("querying %q over a range: %w", expr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("querying %q over a range: %w", expr, err)
	}
	defer resp.Body.Close()
	var rr rangeResponse
	if err := json.NewDecoder(resp.Body).Decode(&rr); err != nil {
		return nil, fmt.Errorf("decoding the answer to %q: %w", expr, err)
	}
	if rr.Status != "success" || rr.Data.ResultType != "matrix" {
		return nil, fmt.Errorf("range query %q: status %s, type %s: %s", expr, rr.Status, rr.Data.ResultType, rr.Error)
	}
	out := make([]Series, 0, len(rr.Data.Result))
	for _, r := range rr.Data.Result {
		se := Series{Labels: r.Metric}
		for _, p := range r.Values {
			str, _ := p[1].(string)
			v, err := strconv.ParseFloat(str, 64)
			if err != nil {
				return nil, fmt.Errorf("range query %q: value %v: %w", expr, p[1], err)
			}
			se.Values = append(se.Values, v)
		}
		out = append(out, se)
	}
	return out, nil
}

func unix(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64)
}
