package exporter

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
)

// TestURLDaemonRetriesThrottledLists: a 429 is asked again after its
// Retry-After, and every page is read.
func TestURLDaemonRetriesThrottledLists(t *testing.T) {
	api := NewServer(ServerConfig{Source: manyTerminations(1200)}).Handler()
	var asked, throttled atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if asked.Add(1)%2 == 1 { // every first ask of a page
			throttled.Add(1)
			w.Header().Set("Retry-After", "0") // 1 s, the least a client waits
			http.Error(w, "busy", http.StatusTooManyRequests)
			return
		}
		api.ServeHTTP(w, r)
	}))
	defer ts.Close()
	list, err := URLDaemon(ts.URL, ts.Client()).Terminations(context.Background(), url.Values{})
	if err != nil || len(list.Terminations) != 1200 || list.Continue != "" {
		t.Fatalf("%d terminations, continue %q, %v; want 1200", len(list.Terminations), list.Continue, err)
	}
	if asked.Load() != 6 || throttled.Load() != 3 {
		t.Errorf("%d asks, %d throttled; want 3 pages of 500 each asked twice", asked.Load(), throttled.Load())
	}
}
