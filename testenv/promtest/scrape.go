package promtest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// ScrapeHandler serves h (an exporter's handler, /metrics) on a loopback
// port and starts the real Prometheus scraping it; both stop when the
// test ends.
func ScrapeHandler(t testing.TB, h http.Handler) *Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return Start(t, l.Addr().String())
}

// WaitValue waits until expr returns one sample of value want, failing
// the test (with Prometheus' log) when ctx ends first.
func (s *Server) WaitValue(ctx context.Context, t testing.TB, expr string, want float64) {
	t.Helper()
	if _, err := s.QueryWhen(ctx, expr, func(got []Sample) bool { return len(got) == 1 && got[0].Value == want }); err != nil {
		t.Fatalf("%v\n%s", err, s.Log())
	}
}
