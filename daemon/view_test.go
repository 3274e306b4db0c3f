package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

var viewT0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// syntheticTermination is the i-th complete termination of a rollout
// history: two namespaces, ten workloads, one a minute, conns points.
func syntheticTermination(i, conns int) correlate.Termination {
	at := viewT0.Add(time.Duration(i) * time.Minute)
	t := correlate.Termination{
		PodUID: fmt.Sprintf("uid-%05d", i), Pod: fmt.Sprintf("web-%05d", i), Complete: true, Outcome: "refused",
		Workload: collector.Workload{Namespace: fmt.Sprintf("ns-%d", i%2), Kind: "Deployment", Name: fmt.Sprintf("web-%d", i%10), Revision: fmt.Sprintf("rev-%d", i/100)},
		Counts:   correlate.Counts{RefusedAfterSigterm: conns},
		Marks:    correlate.Marks{DeletionSeen: at, StopSignal: at.Add(time.Millisecond), Exit: at.Add(2 * time.Second), PodGone: at.Add(3 * time.Second)},
	}
	for k := range conns {
		t.Connections = append(t.Connections, correlate.ConnPoint{Time: at.Add(time.Duration(k+2) * time.Millisecond), Refused: true})
	}
	return t
}

// completeThrough keeps n terminations in v as the loop does: kept when
// complete, saved to the store by each checkpoint (every 20 here).
func completeThrough(t testing.TB, v *terminationView, s *Store, n, conns int) {
	var batch []correlate.Termination
	for i := range n {
		term := syntheticTermination(i, conns)
		v.keep(term)
		batch = append(batch, term)
		if len(batch) == 20 || i == n-1 {
			if s != nil {
				if err := s.SaveCheckpoint(Checkpoint{Alive: viewT0}, batch); err != nil {
					t.Fatal(err)
				}
			}
			v.saved()
			batch = nil
		}
	}
}

// The API answers the same for terminations held in memory and for those
// read back from the store: 600 terminations, 50 in memory.
func TestViewServesOlderTerminationsFromStore(t *testing.T) {
	const n, bound = 600, 50
	all := newTerminationView(n*2, zerolog.Nop())
	completeThrough(t, all, nil, n, 3)
	s, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bounded := newTerminationView(bound, zerolog.Nop())
	bounded.readOlder(s)
	completeThrough(t, bounded, s, n, 3)
	live := correlate.Termination{PodUID: "live", Pod: "web-live", Workload: collector.Workload{Namespace: "ns-0", Name: "web-0"},
		Marks: correlate.Marks{DeletionSeen: viewT0.Add(n * time.Minute)}}
	all.publish([]correlate.Termination{live})
	bounded.publish([]correlate.Termination{live})
	if len(bounded.recent) != bound || len(bounded.order) != bound {
		t.Fatalf("%d terminations in memory (%d ordered), want %d", len(bounded.recent), len(bounded.order), bound)
	}
	now := func() time.Time { return viewT0.Add(n * time.Minute) }
	want := httptest.NewServer(exporter.NewServer(exporter.ServerConfig{Source: all, Now: now}).Handler())
	defer want.Close()
	got := httptest.NewServer(exporter.NewServer(exporter.ServerConfig{Source: bounded, Now: now}).Handler())
	defer got.Close()
	queries := map[string]int{
		"": n + 1, "namespace=ns-1": n / 2, "workload=web-3": n / 10, "namespace=ns-0&workload=web-0": n/10 + 1,
		"pod=web-00007": 1, "pod=web-00590": 1, "revision=rev-0": 100, "since=15m": 16,
		"since=" + url.QueryEscape(viewT0.Add(100*time.Minute).Format(time.RFC3339)): n - 100 + 1,
	}
	for q, count := range queries {
		// Every page, as timeline reads them: the store's terminations are on
		// pages after the recent ones' as well.
		body, list := listAll(t, got.URL, q)
		if w, _ := listAll(t, want.URL, q); body != w {
			t.Errorf("?%s: the bounded view answers\n%.400s\nwant\n%.400s", q, body, w)
		}
		if len(list.Terminations) != count {
			t.Errorf("?%s: %d terminations, want %d", q, len(list.Terminations), count)
		}
	}
	for _, uid := range []string{"uid-00000", "uid-00549", "uid-00550", "uid-00599", "live", "nobody"} {
		if body, w := get(t, got.URL+"/api/v1/terminations/"+uid), get(t, want.URL+"/api/v1/terminations/"+uid); body != w {
			t.Errorf("%s: the bounded view answers\n%.400s\nwant\n%.400s", uid, body, w)
		}
	}
}

// listAll reads every page of the list q asks for, and returns it as JSON.
func listAll(t *testing.T, base, q string) (string, exporter.TerminationList) {
	t.Helper()
	v, err := url.ParseQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	list, err := exporter.URLDaemon(base, http.DefaultClient).Terminations(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), list
}

func get(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}

// TestViewHeapPerTermination completes 5,000 terminations of 200
// connection points each through the view and the store: the heap the
// view keeps is bounded by --completed-in-memory, not by how many
// completed (issue 16: RSS grew ~37 KiB per termination in a soak).
func TestViewHeapPerTermination(t *testing.T) {
	const n, conns = 5000, 200
	s, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v := newTerminationView(DefaultCompletedInMemory, zerolog.Nop())
	v.readOlder(s)
	before := heapAlloc()
	completeThrough(t, v, s, n, conns)
	kept := heapAlloc() - before
	runtime.KeepAlive(v)
	t.Logf("heap kept by the view: %d bytes for %d terminations of %d points, %d per termination; %d in memory",
		kept, n, conns, kept/n, len(v.recent))
	if len(v.recent) != DefaultCompletedInMemory {
		t.Errorf("%d terminations in memory, want %d", len(v.recent), DefaultCompletedInMemory)
	}
	// 256 records of 200 points (~6 KB each) and slack; 5,000 would be ~30 MB.
	if kept > 4<<20 {
		t.Errorf("the view keeps %d bytes after %d terminations, want at most 4 MiB", kept, n)
	}
}

func heapAlloc() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// A pod's container terminations and its own are kept apart (their keys
// differ): the view lists all three, and Get answers the pod's own.
func TestViewKeepsContainerTerminationsApart(t *testing.T) {
	v := newTerminationView(DefaultCompletedInMemory, zerolog.Nop())
	pod := syntheticTermination(1, 3)
	restart := func(minute int) correlate.Termination {
		r := pod
		r.Container = "server"
		at := viewT0.Add(time.Duration(minute) * time.Minute)
		r.Marks = correlate.Marks{StopSignal: at, Exit: at.Add(time.Second)}
		return r
	}
	v.keep(restart(-5), restart(-3), pod)
	if n := len(v.Terminations()); n != 3 {
		t.Fatalf("%d terminations listed, want the pod's and its two restarts'", n)
	}
	if got, ok := v.Get(pod.PodUID); !ok || got.Container != "" {
		t.Fatalf("Get = container %q, %v: want the pod's own termination", got.Container, ok)
	}
}
