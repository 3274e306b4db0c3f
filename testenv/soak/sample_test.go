package soak

import (
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// TestScrapeGoRuntime: the names takeSample reads are served by
// client_golang's Go collector, which the daemon registers, and each is
// read as its one series; a name not served is an error.
func TestScrapeGoRuntime(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	got, err := scrape(srv.URL, "go_goroutines", "go_memstats_alloc_bytes", "go_memstats_heap_inuse_bytes")
	if err != nil {
		t.Fatal(err)
	}
	if n := got["go_goroutines"]; n < 1 || n > float64(runtime.NumGoroutine()+10) {
		t.Errorf("go_goroutines = %v, this process runs %d", n, runtime.NumGoroutine())
	}
	if got["go_memstats_alloc_bytes"] <= 0 || got["go_memstats_heap_inuse_bytes"] < got["go_memstats_alloc_bytes"] {
		t.Errorf("heap alloc %v in use %v: want 0 < alloc <= in use", got["go_memstats_alloc_bytes"], got["go_memstats_heap_inuse_bytes"])
	}
	if _, err := scrape(srv.URL, "go_no_such_metric"); err == nil {
		t.Error("a name not served: no error")
	}
}
