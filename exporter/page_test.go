package exporter

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
)

// manyTerminations are n terminations in scrambled order whose starts tie
// in threes (the pod name decides), and every fifth a container
// termination of the pod before it (same pod, same start: the key decides).
func manyTerminations(n int) fakeSource {
	src := make(fakeSource, 0, n)
	for i := range n {
		j := (i * 7919) % n // a permutation when n is not a multiple of 7919
		pod, uid, container := fmt.Sprintf("web-%05d", j), fmt.Sprintf("uid-%05d", j), ""
		if j%5 == 4 {
			pod, uid, container = fmt.Sprintf("web-%05d", j-1), fmt.Sprintf("uid-%05d", j-1), "app"
		}
		src = append(src, correlate.Termination{PodUID: uid, Pod: pod, Container: container,
			Workload: collector.Workload{Namespace: "shop", Name: "web"},
			Marks:    correlate.Marks{DeletionSeen: at(float64(j / 3)), PodGone: at(float64(j/3) + 1)}, Complete: true})
	}
	return src
}

func pageServer(t *testing.T, src TerminationSource) *httptest.Server {
	t.Helper()
	s := NewServer(ServerConfig{Source: src, Log: zerolog.Nop(), Now: func() time.Time { return at(60) }})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

func getList(t *testing.T, u string) TerminationList {
	t.Helper()
	code, body := get(t, u)
	var list TerminationList
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil {
		t.Fatalf("GET %s: %d %v %.300s", u, code, err, body)
	}
	return list
}

func TestPageSizes(t *testing.T) {
	ts := pageServer(t, manyTerminations(1200))
	for _, c := range []struct {
		query string
		want  int
	}{
		{"", DefaultPageSize}, {"?limit=7", 7}, {"?limit=500", 500}, {"?limit=501", MaxPageSize}, {"?limit=1000000", MaxPageSize},
	} {
		list := getList(t, ts.URL+"/api/v1/terminations"+c.query)
		if len(list.Terminations) != c.want || list.Continue == "" {
			t.Errorf("%q: %d terminations, continue %q; want %d and a token", c.query, len(list.Terminations), list.Continue, c.want)
		}
	}
	if list := getList(t, ts.URL+"/api/v1/terminations?namespace=none"); len(list.Terminations) != 0 || list.Continue != "" {
		t.Errorf("an empty list: %+v", list)
	}
}

func TestPageRejectsBadParameters(t *testing.T) {
	ts := pageServer(t, manyTerminations(10))
	for query, want := range map[string]string{
		"limit=0":              `limit="0": give a number of terminations from 1 to 500`,
		"limit=-3":             `limit="-3": give a number of terminations from 1 to 500`,
		"limit=ten":            `limit="ten": give a number of terminations from 1 to 500`,
		"continue=%25%25":      `continue="%%" is not a token this API returned (not base64url): list again without continue`,
		"continue=bm90LWpzb24": `continue="bm90LWpzb24" is not a token this API returned (not a cursor): list again without continue`,
		"continue=eyJ2Ijo5fQ":  `continue="eyJ2Ijo5fQ" is not a token this API returned (version 9, this daemon reads 1): list again without continue`,
	} {
		code, body := get(t, ts.URL+"/api/v1/terminations?"+query)
		if code != 400 || strings.TrimSpace(body) != want {
			t.Errorf("?%s: %d %q, want 400 %q", query, code, body, want)
		}
	}
}

// TestPagesListEachOnce follows continue across pages of 7 and gets every
// termination exactly once, in the list order, with a tie in start and in
// pod on most page boundaries.
func TestPagesListEachOnce(t *testing.T) {
	const n = 250
	src := manyTerminations(n)
	ts := pageServer(t, src)
	var got []TerminationView
	q := url.Values{"limit": {"7"}}
	pages := 0
	for ; pages < n; pages++ { // bounded: 36 pages are enough
		list := getList(t, ts.URL+"/api/v1/terminations?"+q.Encode())
		got = append(got, list.Terminations...)
		if list.Continue == "" {
			break
		}
		q.Set("continue", list.Continue)
	}
	if want := (n + 6) / 7; pages+1 != want {
		t.Errorf("%d pages, want %d", pages+1, want)
	}
	seen := map[string]int{}
	for i, v := range got {
		seen[v.Key()]++
		if i > 0 && compareOrder(got[i-1].Termination, v.Termination) >= 0 {
			t.Errorf("item %d (%s) is not after item %d (%s)", i, v.Key(), i-1, got[i-1].Key())
		}
	}
	for _, tm := range src {
		if seen[tm.Key()] != 1 {
			t.Errorf("%s listed %d times, want once", tm.Key(), seen[tm.Key()])
		}
	}
	if len(got) != n || len(seen) != n {
		t.Errorf("%d listed (%d distinct), want %d", len(got), len(seen), n)
	}
}

// TestPageWithNewTerminations: one added before the cursor is not listed,
// one added after it is, and none twice.
func TestPageWithNewTerminations(t *testing.T) {
	src := manyTerminations(30)
	first, next := SelectPage(src, Filter{}, PageRequest{Limit: 10})
	c, err := decodeCursor(next)
	if err != nil || len(first) != 10 {
		t.Fatalf("%d, %v", len(first), err)
	}
	early := correlate.Termination{PodUID: "early", Pod: "a-early", Marks: correlate.Marks{DeletionSeen: at(-1)}}
	late := correlate.Termination{PodUID: "late", Pod: "z-late", Marks: correlate.Marks{DeletionSeen: at(100)}}
	rest, next := SelectPage(append(src, early, late), Filter{}, PageRequest{Limit: 100, After: &c})
	if len(rest) != 21 || next != "" || rest[20].PodUID != "late" {
		t.Errorf("%d after the first page (last %s), continue %q; want 20 and late", len(rest), rest[len(rest)-1].PodUID, next)
	}
}

// TestPageEndsAtItsPoints: terminations full of connection points end a
// page before its limit, and one alone larger than that is still a page.
func TestPageEndsAtItsPoints(t *testing.T) {
	src := manyTerminations(100)
	for i := range src {
		src[i].Connections = make([]correlate.ConnPoint, 2048)
	}
	page, next := SelectPage(src, Filter{}, PageRequest{Limit: MaxPageSize})
	if len(page) != pagePoints/2048 || next == "" {
		t.Errorf("%d terminations of 2,048 points, continue %q; want %d and a token", len(page), next, pagePoints/2048)
	}
	src[0].Connections = make([]correlate.ConnPoint, pagePoints+1)
	page, _ = SelectPage(src[:1], Filter{}, PageRequest{Limit: MaxPageSize})
	if len(page) != 1 {
		t.Errorf("a termination alone over the points: a page of %d, want 1", len(page))
	}
}

// TestTimelinePageShowsTheLatest: /ui renders the 50 last terminations
// only, however many match.
func TestTimelinePageShowsTheLatest(t *testing.T) {
	const n = 120
	src := manyTerminations(n)
	latest := selectLatest(src, Filter{}, maxTimelines)
	all, _ := SelectPage(src, Filter{}, PageRequest{Limit: MaxPageSize})
	if len(latest) != maxTimelines || latest[0].Key() != all[n-maxTimelines].Key() || latest[maxTimelines-1].Key() != all[n-1].Key() {
		t.Fatalf("latest %d: from %s to %s, want %s to %s", len(latest), latest[0].Key(), latest[len(latest)-1].Key(),
			all[n-maxTimelines].Key(), all[n-1].Key())
	}
	_, body := get(t, pageServer(t, src).URL+"/ui")
	if got := strings.Count(body, `href="api/v1/terminations/`); got != maxTimelines {
		t.Errorf("/ui links %d terminations, want %d", got, maxTimelines)
	}
}
