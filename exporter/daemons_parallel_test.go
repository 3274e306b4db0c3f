package exporter

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/correlate"
)

// gateDaemon answers only once QueryParallelism daemons have been asked at
// once: a sequential QueryDaemons never gets past the first.
type gateDaemon struct {
	name string
	g    *gate
}

type gate struct {
	mu       sync.Mutex
	inFlight int
	max      int
	opened   bool
	open     chan struct{}
}

func (d gateDaemon) Name() string { return d.name }

func (d gateDaemon) Terminations(ctx context.Context, _ url.Values) (TerminationList, error) {
	d.g.mu.Lock()
	d.g.inFlight++
	d.g.max = max(d.g.max, d.g.inFlight)
	if d.g.max == QueryParallelism && !d.g.opened {
		d.g.opened = true // opens once, for good: the bound is checked by max
		close(d.g.open)
	}
	d.g.mu.Unlock()
	defer func() {
		d.g.mu.Lock()
		d.g.inFlight--
		d.g.mu.Unlock()
	}()
	select {
	case <-d.g.open:
	case <-ctx.Done():
		return TerminationList{}, ctx.Err()
	}
	return TerminationList{Terminations: []TerminationView{{Termination: correlate.Termination{Pod: d.name}}}}, nil
}

func (d gateDaemon) Startups(context.Context, url.Values) (StartupList, error) {
	return StartupList{}, nil
}

func TestQueryDaemonsInParallelBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g := &gate{open: make(chan struct{})}
	var ds []Daemon
	for i := range 2 * QueryParallelism {
		ds = append(ds, gateDaemon{name: fmt.Sprintf("node-%02d", i), g: g})
	}
	views, errs := QueryDaemons(ctx, ds, Filter{})
	if len(errs) != 0 {
		t.Fatalf("errors (a sequential query never opens the gate): %v", errs)
	}
	if len(views) != 2*QueryParallelism || g.max != QueryParallelism {
		t.Errorf("%d terminations, at most %d daemons asked at once; want %d and %d",
			len(views), g.max, 2*QueryParallelism, QueryParallelism)
	}
}

func TestParseFilterRejectsNegativeSince(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	_, err := ParseFilter(url.Values{"since": {"-5m"}}, now)
	if err == nil || err.Error() != `since="-5m" is negative: give how far back, like 5m0s` {
		t.Errorf("since=-5m: %v", err)
	}
	_, err = ParseFilter(url.Values{"since": {"yesterday"}}, now)
	if err == nil || err.Error() != `since="yesterday" is neither RFC 3339 nor a duration like 15m` {
		t.Errorf("since=yesterday: %v", err)
	}
	f, err := ParseFilter(url.Values{"since": {"5m"}, "revision": {"7"}}, now)
	if err != nil || !f.Since.Equal(now.Add(-5*time.Minute)) || f.Revision != "7" || f.Query().Get("revision") != "7" {
		t.Errorf("since=5m revision=7: %+v %v", f, err)
	}
	rev7 := correlate.Termination{}
	rev7.Workload.Revision = "7"
	rev8 := rev7
	rev8.Workload.Revision = "8"
	if !(Filter{Revision: "7"}).Match(rev7) || (Filter{Revision: "7"}).Match(rev8) {
		t.Error("Filter.Revision does not select the revision")
	}
}
