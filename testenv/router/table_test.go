package router

import (
	"context"
	"slices"
	"testing"
	"time"
)

func picks(t *Table, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i], _ = t.Pick()
	}
	return out
}

// TestTableAppliesAfterDelay: a removal observed now keeps its backend in
// rotation until the delay has passed, then the backend gets nothing.
func TestTableAppliesAfterDelay(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tbl := NewTable(300 * time.Millisecond)
	go tbl.Run(ctx)
	if _, ok := tbl.Pick(); ok {
		t.Fatal("empty table picked a backend")
	}
	tbl.Observe([]string{"b:1", "a:1"}, true)
	if got := picks(tbl, 4); !slices.Equal(got, []string{"a:1", "b:1", "a:1", "b:1"}) {
		t.Fatalf("initial picks %v", got)
	}
	tbl.Observe([]string{"a:1"}, false)
	if got := picks(tbl, 4); !slices.Equal(got, []string{"a:1", "b:1", "a:1", "b:1"}) {
		t.Fatalf("picks during the delay %v, want b:1 still in rotation", got)
	}
	for !slices.Equal(tbl.Backends(), []string{"a:1"}) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := picks(tbl, 4); !slices.Equal(got, []string{"a:1", "a:1", "a:1", "a:1"}) {
		t.Fatalf("picks after the delay %v", got)
	}
	ch := tbl.Changes()
	if len(ch) != 2 || ch[0].Applied != ch[0].Seen || ch[1].Applied.Sub(ch[1].Seen) < 300*time.Millisecond {
		t.Fatalf("changes %+v: want the initial set applied at once, the removal after 300 ms", ch)
	}
}
