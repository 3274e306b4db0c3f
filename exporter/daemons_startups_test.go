package exporter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

// oldDaemon is a daemon from before /api/v1/startups: its mux answers the
// path 404, as Go's ServeMux does.
func oldDaemon(srv *Server) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /api/v1/terminations", srv.Handler())
	return mux
}

// startupNames are "pod@daemon" of each startup, in order.
func startupNames(vs []StartupView) []string {
	names := []string{}
	for _, v := range vs {
		names = append(names, v.Pod+"@"+v.Daemon)
	}
	return names
}

// queryRecorder records the query of every startups request.
type queryRecorder struct {
	mu      sync.Mutex
	queries []string
}

func (q *queryRecorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/startups" {
			q.mu.Lock()
			q.queries = append(q.queries, r.URL.RawQuery)
			q.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

// TestQueryTimeline: a current daemon lists its terminations and the
// startups the filter selects; one too old to serve startups is named,
// not an error; one whose startups fail is one error, its terminations
// kept; one that answers nothing is one error, not asked for startups.
func TestQueryTimeline(t *testing.T) {
	startups := manyStartups(3)
	startups[1].Workload.Namespace = "other"
	var asked queryRecorder
	current := httptest.NewServer(asked.wrap(NewServer(ServerConfig{Source: fakeSource{naiveTermination()}, Startups: startups}).Handler()))
	defer current.Close()
	old := httptest.NewServer(oldDaemon(NewServer(ServerConfig{Source: fakeSource{killedTermination()}})))
	defer old.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/startups" {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, `{"terminations": []}`)
	}))
	defer broken.Close()
	ds := []Daemon{URLDaemon(current.URL, http.DefaultClient), URLDaemon(old.URL, http.DefaultClient),
		URLDaemon(broken.URL, http.DefaultClient), URLDaemon("http://127.0.0.1:1", http.DefaultClient)}
	tl, errs := QueryTimeline(context.Background(), ds, Filter{Namespace: "shop"}, true)
	if tl.Answered != 3 || podNames(tl.Terminations) != "web-6d4f-a,web-6d4f-b" {
		t.Errorf("%d daemons answered, terminations %s; want 3, web-6d4f-a,web-6d4f-b", tl.Answered, podNames(tl.Terminations))
	}
	if got, want := startupNames(tl.Startups), []string{"web-0@" + current.URL, "web-2@" + current.URL}; !slices.Equal(got, want) {
		t.Errorf("startups %v, want %v (oldest first)", got, want)
	}
	if !slices.Equal(tl.NoStartups, []string{old.URL}) || len(tl.TruncatedStartups) != 0 {
		t.Errorf("no startups from %v, truncated %v; want [%s], none", tl.NoStartups, tl.TruncatedStartups, old.URL)
	}
	if !slices.Equal(asked.queries, []string{"limit=500&namespace=shop"}) {
		t.Errorf("startups queries %q, want [limit=500&namespace=shop]", asked.queries)
	}
	wantBroken := "daemon " + broken.URL + ": startups: GET " + broken.URL + "/api/v1/startups?limit=500&namespace=shop: 500 Internal Server Error: boom"
	if len(errs) != 2 || errs[0].Error() != wantBroken ||
		!strings.HasPrefix(errs[1].Error(), "daemon http://127.0.0.1:1: GET http://127.0.0.1:1/api/v1/terminations?limit=500&namespace=shop: ") {
		t.Errorf("errors %v; want:\n%s\ndaemon http://127.0.0.1:1: GET ...", errs, wantBroken)
	}
}

// TestQueryTimelineWithoutStartups: not asked, no daemon is asked for
// startups and the document has no startups field; asked, it has one even
// when empty.
func TestQueryTimelineWithoutStartups(t *testing.T) {
	var asked queryRecorder
	current := httptest.NewServer(asked.wrap(NewServer(ServerConfig{Source: fakeSource{naiveTermination()}}).Handler()))
	defer current.Close()
	ds := []Daemon{URLDaemon(current.URL, http.DefaultClient)}
	for startups, want := range map[bool]string{false: "terminations", true: "startups,terminations"} {
		tl, errs := QueryTimeline(context.Background(), ds, Filter{}, startups)
		data, err := json.Marshal(tl)
		var doc map[string]json.RawMessage
		if err == nil {
			err = json.Unmarshal(data, &doc)
		}
		keys := slices.Sorted(maps.Keys(doc))
		if len(errs) != 0 || err != nil || strings.Join(keys, ",") != want || (startups && string(doc["startups"]) != "[]") {
			t.Errorf("startups %v: fields %v (%v, %v), want %s", startups, keys, errs, err, want)
		}
	}
	if len(asked.queries) != 1 {
		t.Errorf("%d startups queries, want 1 (asked once)", len(asked.queries))
	}
}

// TestQueryTimelineTruncatedStartups: a daemon that holds more matching
// startups than a list carries lists the latest MaxPageSize and is named.
func TestQueryTimelineTruncatedStartups(t *testing.T) {
	srv := httptest.NewServer(NewServer(ServerConfig{Startups: manyStartups(MaxPageSize + 1)}).Handler())
	defer srv.Close()
	tl, errs := QueryTimeline(context.Background(), []Daemon{URLDaemon(srv.URL, http.DefaultClient)}, Filter{}, true)
	if len(errs) != 0 || len(tl.Startups) != MaxPageSize || tl.Startups[0].Pod != "web-1" || !slices.Equal(tl.TruncatedStartups, []string{srv.URL}) {
		t.Errorf("%d startups from %s, truncated %v (%v); want 500 from web-1, [%s]", len(tl.Startups), tl.Startups[0].Pod, tl.TruncatedStartups, errs, srv.URL)
	}
}

// TestProxyDaemonStartups: through the pod proxy, the startups are asked
// with the terminations' filter; a daemon's own 404 is ErrStartupsNotServed,
// the API server's 404 (the pod is gone) an error.
func TestProxyDaemonStartups(t *testing.T) {
	client := fake.NewClientset()
	handlers := map[string]http.Handler{
		"dw-a": NewServer(ServerConfig{Source: fakeSource{naiveTermination()}, Startups: manyStartups(2)}).Handler(),
		"dw-b": oldDaemon(NewServer(ServerConfig{Source: fakeSource{killedTermination()}})),
	}
	var asked []string
	client.PrependProxyReactor("pods", func(a k8stesting.Action) (bool, restclient.ResponseWrapper, error) {
		pa := a.(k8stesting.ProxyGetAction)
		q := url.Values{}
		for k, v := range pa.GetParams() {
			q.Set(k, v)
		}
		asked = append(asked, pa.GetName()+"/"+pa.GetPath()+"?"+q.Encode())
		return true, proxyResponse{handlers[pa.GetName()], "/" + pa.GetPath() + "?" + q.Encode()}, nil
	})
	ds := []Daemon{proxyDaemon{client: client, namespace: "drainwatch", pod: "dw-a", port: 9090},
		proxyDaemon{client: client, namespace: "drainwatch", pod: "dw-b", port: 9090}}
	tl, errs := QueryTimeline(context.Background(), ds[:1], Filter{Workload: "web"}, true)
	_, oldErr := ds[1].Startups(context.Background(), url.Values{})
	if len(errs) != 0 || !slices.Equal(startupNames(tl.Startups), []string{"web-0@drainwatch/dw-a", "web-1@drainwatch/dw-a"}) {
		t.Errorf("startups %v, errors %v", startupNames(tl.Startups), errs)
	}
	want := []string{"dw-a/api/v1/terminations?limit=500&workload=web", "dw-a/api/v1/startups?limit=500&workload=web", "dw-b/api/v1/startups?limit=500"}
	if !slices.Equal(asked, want) || !errors.Is(oldErr, ErrStartupsNotServed) {
		t.Errorf("proxy requests %v, the old daemon's error %v; want %v, ErrStartupsNotServed", asked, oldErr, want)
	}
}

func TestDaemonNotFound(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("pod proxy to drainwatch/dw-a:9090: %w", apierrors.NewGenericServerResponse(404, "get", pods, "", "404 page not found", 0, true)), true},
		{apierrors.NewNotFound(pods, "dw-a"), false},
		{apierrors.NewGenericServerResponse(500, "get", pods, "", "boom", 0, true), false},
		{errors.New("404"), false},
		{nil, false},
	} {
		if got := daemonNotFound(c.err); got != c.want {
			t.Errorf("daemonNotFound(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
