package exporter

import (
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"
)

// TestHealthzReportsTheReason: /healthz is 503 with Healthy's error, 200
// otherwise, independently of /readyz.
func TestHealthzReportsTheReason(t *testing.T) {
	for _, c := range []struct {
		name    string
		healthy func() error
		code    int
		body    string
	}{
		{"nil", nil, 200, "ok\n"},
		{"ok", func() error { return nil }, 200, "ok\n"},
		{"reader stopped", func() error { return errors.New("the ring-buffer reader stopped") }, 503,
			"unhealthy: the ring-buffer reader stopped\n"},
	} {
		s := NewServer(ServerConfig{Healthy: c.healthy, Ready: func() error { return errors.New("not synced") }, Log: zerolog.Nop()})
		ts := httptest.NewServer(s.Handler())
		code, body := get(t, ts.URL+"/healthz")
		ts.Close()
		if code != c.code || body != c.body {
			t.Errorf("%s: /healthz %d %q, want %d %q", c.name, code, body, c.code, c.body)
		}
	}
}
