package otlp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// source is a Source in memory, with records that expire.
type source struct {
	mu      sync.Mutex
	pending []Entry
	expired int
	acked   []string
}

func (s *source) Pending(n int) ([]Entry, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	exp := s.expired
	s.expired = 0
	return slices.Clone(s.pending[:min(n, len(s.pending))]), exp, nil
}

func (s *source) Acknowledge(entries []Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.ID)
	}
	s.acked = append(s.acked, ids...)
	s.pending = slices.DeleteFunc(s.pending, func(e Entry) bool { return slices.Contains(ids, e.ID) })
	return nil
}

func (s *source) add(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		s.pending = append(s.pending, Entry{ID: id, EventName: EventTermination, Time: time.Unix(1, 0),
			Attrs: []attribute.KeyValue{attribute.String(AttrRecordID, id)}, Body: "b"})
	}
}

// fakeCollector is an SDK exporter that fails while down, rejects while
// invalid, and keeps what it accepted.
type fakeCollector struct {
	mu      sync.Mutex
	down    bool
	invalid bool
	got     []string
	calls   int
}

func (c *fakeCollector) Export(_ context.Context, recs []sdklog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.down {
		return errors.New("connection refused")
	}
	if c.invalid {
		return status.Error(codes.InvalidArgument, "bad record")
	}
	for _, r := range recs {
		r.WalkAttributes(func(kv attribute.KeyValue) bool {
			if string(kv.Key) == AttrRecordID {
				c.got = append(c.got, kv.Value.AsString())
			}
			return true
		})
	}
	return nil
}
func (c *fakeCollector) Shutdown(context.Context) error   { return nil }
func (c *fakeCollector) ForceFlush(context.Context) error { return nil }

func (c *fakeCollector) set(down, invalid bool) {
	c.mu.Lock()
	c.down, c.invalid = down, invalid
	c.mu.Unlock()
}

func (c *fakeCollector) received() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestExporterRetriesFromSource: records pending at start go first; while
// the collector is down they stay pending (failures counted, nothing
// dropped) and go once it is back, each id once; expired and rejected
// records are counted by reason.
func TestExporterRetriesFromSource(t *testing.T) {
	src := &source{}
	src.add("a", "b", "c")
	col := &fakeCollector{}
	m := NewMetrics()
	e := newExporter(Config{Batch: 2, RetryMin: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond}, src, m, col)
	go e.Run()
	waitFor(t, "the records pending at start", func() bool { return len(col.received()) == 3 })

	col.set(true, false)
	src.add("d", "e")
	e.Notify()
	waitFor(t, "failed exports", func() bool { return testutil.ToFloat64(m.Failures) >= 2 })
	if got := col.received(); len(got) != 3 {
		t.Fatalf("received %v while the collector was down", got)
	}
	col.set(false, false)
	waitFor(t, "the retry", func() bool { return len(col.received()) == 5 })

	src.mu.Lock()
	src.expired = 4
	src.mu.Unlock()
	col.set(false, true)
	src.add("f")
	e.Notify()
	waitFor(t, "the rejection", func() bool { return testutil.ToFloat64(m.Dropped.WithLabelValues(DropRejected)) == 1 })
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := col.received(), []string{"a", "b", "c", "d", "e"}; !slices.Equal(got, want) {
		t.Fatalf("received %v, want %v (each once, in order)", got, want)
	}
	if got := testutil.ToFloat64(m.Exported); got != 5 {
		t.Fatalf("exported %v, want 5", got)
	}
	if got := testutil.ToFloat64(m.Dropped.WithLabelValues(DropExpired)); got != 4 {
		t.Fatalf("dropped expired %v, want 4", got)
	}
	if len(src.pending) != 0 {
		t.Fatalf("still pending: %v", src.pending)
	}
}

// TestNotifyNeverBlocks: the daemon's loop calls Notify at every
// checkpoint; with the exporter stuck in a slow export, Notify returns.
func TestNotifyNeverBlocks(t *testing.T) {
	e := newExporter(Config{}, &source{}, NewMetrics(), &fakeCollector{})
	done := make(chan struct{})
	go func() {
		for range 1000 {
			e.Notify()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Notify blocked without a running exporter")
	}
}

func TestLogsURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://c:4318":          "http://c:4318/v1/logs",
		"https://c:4318/":        "https://c:4318/v1/logs",
		"https://c/otlp/v1/logs": "https://c/otlp/v1/logs",
	} {
		if got := logsURL(in); got != want {
			t.Errorf("logsURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRejected: an invalid batch is told from a failure worth retrying,
// through the SDK's wrapping.
func TestRejected(t *testing.T) {
	for err, want := range map[error]bool{
		fmt.Errorf("exporting: %w", status.Error(codes.InvalidArgument, "bad")):        true,
		fmt.Errorf("exporting: %w", status.Error(codes.Unavailable, "down")):           false,
		errors.New("failed to send logs to http://c/v1/logs: 400 Bad Request"):         true,
		errors.New("failed to send logs to http://c/v1/logs: 503 Service Unavailable"): false,
		errors.New("dial tcp 127.0.0.1:4317: connect: connection refused"):             false,
	} {
		if got := rejected(err); got != want {
			t.Errorf("rejected(%v) = %v, want %v", err, got, want)
		}
	}
}
