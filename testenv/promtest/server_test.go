package promtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestPrometheusScrapesAndQueries starts the real Prometheus against a
// loopback target exposing a known counter and reads it back exactly.
func TestPrometheusScrapesAndQueries(t *testing.T) {
	target := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, "# TYPE demo_refused_total counter\ndemo_refused_total{workload=\"web\"} 44\n")
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target.Listener = l
	target.Start()
	defer target.Close()

	prom := Start(t, l.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got, err := prom.QueryWhen(ctx, `demo_refused_total`, func(s []Sample) bool { return len(s) > 0 })
	if err != nil {
		t.Fatalf("%v\n%s", err, prom.Log())
	}
	if len(got) != 1 || got[0].Value != 44 || got[0].Labels["workload"] != "web" ||
		got[0].Labels["job"] != "drainwatch" || got[0].Labels["instance"] != l.Addr().String() {
		t.Fatalf("got %+v, want one sample demo_refused_total{workload=web,job=drainwatch,instance=%s} 44", got, l.Addr())
	}
	up, err := prom.Query(ctx, `up{job="drainwatch"}`)
	if err != nil || len(up) != 1 || up[0].Value != 1 {
		t.Fatalf("up = %+v, %v; want 1", up, err)
	}
}
