package router

import (
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/client"
)

// TestJoinReusedPort: a client port the router reset is handed to a later
// request of the same run; each record pairs with the request under way when
// it was accepted, and a request reset before connect() returned has none.
func TestJoinReusedPort(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	reqs := []client.Request{
		{Local: "10.0.0.1:40000", Start: at(50), End: at(60)}, // the port's second use, listed first
		{Local: "10.0.0.1:40000", Start: at(0), End: at(10)},
		{Local: "10.0.0.1:40002", Start: at(20), End: at(30)},
		{Local: "", Start: at(30), End: at(31), Outcome: client.Reset},
	}
	conns := []Conn{
		{Client: "10.0.0.1:40000", Accepted: at(1), Outcome: Refused},
		{Client: "10.0.0.1:40002", Accepted: at(21)},
		{Client: "10.0.0.1:40004", Accepted: at(30), Outcome: Refused},
		{Client: "10.0.0.1:40000", Accepted: at(51)},
	}
	got := Join(reqs, conns)
	want := []int{3, 0, 1, -1}
	for j := range want {
		if got[j] != want[j] {
			t.Fatalf("Join = %v, want %v", got, want)
		}
	}
	// Clocks that disagree (a record outside every window) still pair by
	// address, earliest request first.
	got = Join(reqs[:2], []Conn{{Client: "10.0.0.1:40000", Accepted: at(-5)}})
	if got[0] != -1 || got[1] != 0 {
		t.Fatalf("Join outside the windows = %v, want [-1 0]", got)
	}
}
