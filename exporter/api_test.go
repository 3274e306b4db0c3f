package exporter

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/correlate"
)

// fakeSource is a fixed set of terminations.
type fakeSource []correlate.Termination

func (f fakeSource) Terminations() []correlate.Termination {
	return append([]correlate.Termination(nil), f...)
}

func (f fakeSource) Get(uid string) (correlate.Termination, bool) {
	for _, t := range f {
		if t.PodUID == uid {
			return t, true
		}
	}
	return correlate.Termination{}, false
}

func testServer(t *testing.T, ready func() error) *httptest.Server {
	t.Helper()
	src := fakeSource{killedTermination(), naiveTermination(), barePod()}
	s := NewServer(ServerConfig{Source: src, Metrics: NewMetrics(Options{}), Ready: ready,
		Log: zerolog.Nop(), Now: func() time.Time { return at(60) }})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestAPIListFilters(t *testing.T) {
	ts := testServer(t, nil)
	cases := []struct {
		query string
		want  []string // pod names in order
	}{
		{"", []string{"lonely-pod", "web-6d4f-a", "web-6d4f-b"}},
		{"?namespace=shop", []string{"web-6d4f-a", "web-6d4f-b"}},
		{"?workload=web&pod=web-6d4f-b", []string{"web-6d4f-b"}},
		{"?since=2026-11-29T12:00:10Z", []string{"web-6d4f-b"}}, // only b has a mark after 10 s
		{"?since=1m", []string{"lonely-pod", "web-6d4f-a", "web-6d4f-b"}},
		{"?since=30s", []string{"web-6d4f-b"}}, // now = t0+60s: marks at or after t0+30s
		{"?namespace=none", []string{}},
	}
	for _, c := range cases {
		code, body := get(t, ts.URL+"/api/v1/terminations"+c.query)
		var list TerminationList
		if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil {
			t.Fatalf("%s: %d %v %s", c.query, code, err, body)
		}
		got := []string{}
		for _, v := range list.Terminations {
			got = append(got, v.Pod)
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: pods %v, want %v", c.query, got, c.want)
		}
	}
	if code, _ := get(t, ts.URL+"/api/v1/terminations?since=yesterday"); code != 400 {
		t.Errorf("bad since: status %d, want 400", code)
	}
}

func TestAPIGetOne(t *testing.T) {
	ts := testServer(t, nil)
	code, body := get(t, ts.URL+"/api/v1/terminations/uid-a")
	var v TerminationView
	if err := json.Unmarshal([]byte(body), &v); code != 200 || err != nil {
		t.Fatalf("%d %v %s", code, err, body)
	}
	if v.Counts.RefusedAfterSigterm != 44 || !v.Marks.ListenerClosed.Equal(at(0.125)) ||
		v.Diagnoses[0].Code != correlate.DiagNoDrainDelay || v.Durations["routing_lag_observed"] != 1.0 ||
		v.Durations["listener_close_delay"] != 0.125 || v.Durations["drain_duration"] != 2.5 {
		t.Errorf("uid-a: %+v", v)
	}
	if code, _ := get(t, ts.URL+"/api/v1/terminations/nope"); code != 404 {
		t.Errorf("unknown uid: status %d, want 404", code)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	notReady := testServer(t, func() error { return errors.New("pod informer not synced") })
	if code, body := get(t, notReady.URL+"/readyz"); code != 503 || !strings.Contains(body, "pod informer not synced") {
		t.Errorf("readyz: %d %q", code, body)
	}
	if code, _ := get(t, notReady.URL+"/healthz"); code != 200 {
		t.Errorf("healthz: %d", code)
	}
	ready := testServer(t, nil)
	if code, _ := get(t, ready.URL+"/readyz"); code != 200 {
		t.Errorf("readyz when ready: %d", code)
	}
	if code, body := get(t, ready.URL+"/"); code != 200 || !strings.Contains(body, "pod terminations on this node") {
		t.Errorf("/ does not lead to the timeline page: %d", code)
	}
	if code, body := get(t, ready.URL+"/metrics"); code != 200 || !strings.Contains(body, "drainwatch_build_info") {
		t.Errorf("metrics: %d", code)
	}
}

func TestServerWithoutSource(t *testing.T) {
	ts := httptest.NewServer(NewServer(ServerConfig{Log: zerolog.Nop()}).Handler())
	defer ts.Close()
	if code, body := get(t, ts.URL+"/api/v1/terminations"); code != 200 || !strings.Contains(body, `"terminations": []`) {
		t.Errorf("%d %s", code, body)
	}
	if code, _ := get(t, ts.URL+"/metrics"); code != 404 {
		t.Errorf("/metrics without Metrics: %d, want 404", code)
	}
}
