package exporter

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// FuzzParseFilter: any query string parses or is refused with an error;
// an accepted filter survives Filter.Query and ParseFilter unchanged (what
// `drainwatch timeline` sends is what the daemon applies).
func FuzzParseFilter(f *testing.F) {
	for _, q := range []string{"", "namespace=shop&workload=web", "since=15m", "since=-5m", "since=2026-03-04T05:06:07Z",
		"since=2026-03-04T05:06:07.123456789%2B02:00", "pod=web-a&revision=7&since=1h", "since=9223372036854775807ns",
		"namespace=%ff%fe", "since=yesterday", "namespace=a&namespace=b"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		got, err := ParseFilter(q, t0)
		if err != nil {
			return
		}
		again, err := ParseFilter(got.Query(), t0)
		if err != nil {
			t.Fatalf("%q: the filter's own query %q is refused: %v", raw, got.Query().Encode(), err)
		}
		if again.Namespace != got.Namespace || again.Workload != got.Workload || again.Pod != got.Pod ||
			again.Revision != got.Revision || !again.Since.Equal(got.Since) {
			t.Fatalf("%q: %+v through its query %q is %+v", raw, got, got.Query().Encode(), again)
		}
	})
}

// FuzzAPIQuery: the API and the UI answer any query with 200 or 400 (the
// parse error), never another status or a panic.
func FuzzAPIQuery(f *testing.F) {
	for _, q := range []string{"", "namespace=shop", "since=-1s", "since=%zz", "workload=<script>&since=1h", "revision=7&pod=web-a"} {
		f.Add("/api/v1/terminations", q)
		f.Add("/ui", q)
	}
	f.Add("/api/v1/terminations/uid-1", "")
	src := fakeSource{naiveTermination(), killedTermination(), barePod(), probedTermination()}
	h := NewServer(ServerConfig{Source: src, Log: zerolog.Nop(), Now: func() time.Time { return t0 }}).Handler()
	f.Fuzz(func(t *testing.T, path, rawQuery string) {
		if !strings.HasPrefix(path, "/api/v1/terminations") && path != "/ui" {
			return
		}
		u := &url.URL{Path: path, RawQuery: rawQuery}
		rec := httptest.NewRecorder()
		// Built around the URL: a path with spaces is no request line.
		req := httptest.NewRequest(http.MethodGet, "http://daemon/", nil)
		req.URL, req.RequestURI = u, u.RequestURI()
		h.ServeHTTP(rec, req)
		if c := rec.Code; c != http.StatusOK && c != http.StatusBadRequest && c != http.StatusNotFound &&
			!(c == http.StatusMovedPermanently && strings.Contains(path, "//")) {
			t.Fatalf("GET %s: %d %s", u.RequestURI(), c, rec.Body.String())
		}
	})
}
