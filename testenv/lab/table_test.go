package lab

import (
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/client"
)

// TestKilled pins the clients' definition of a request killed by SIGKILL.
func TestKilled(t *testing.T) {
	kill := Death{SIGKILL: time.Unix(100, 0), Exit: time.Unix(100, 0).Add(5 * time.Millisecond)}
	at := func(s float64) time.Time { return time.Unix(0, 0).Add(time.Duration(s * float64(time.Second))) }
	cases := []struct {
		name       string
		start, end float64
		outcome    client.Outcome
		want       bool
	}{
		{"reset by the kill", 99, 100.01, client.Reset, true},
		{"eof at the kill", 99, 100, client.EOF, true},
		{"answered before", 99, 99.5, client.OK, false},
		{"reset before the kill", 98, 99, client.Reset, false},
		{"accepted between the kill and the Death", 100.002, 100.01, client.Reset, true},
		{"started after the Death", 100.5, 100.6, client.Reset, false},
		{"refused", 99.9, 100.1, client.Refused, false},
		{"write failed", 100.001, 100.002, client.Reset, false},
		{"timed out", 99, 101, client.Timeout, false},
	}
	for _, tc := range cases {
		r := client.Request{Start: at(tc.start), End: at(tc.end), Outcome: tc.outcome, Err: "read tcp: connection reset by peer"}
		if tc.name == "write failed" {
			r.Err = "write tcp 10.0.0.1:1->10.0.0.2:8080: write: broken pipe"
		}
		if got := Killed(r, kill); got != tc.want {
			t.Errorf("%s: killed = %v, want %v", tc.name, got, tc.want)
		}
	}
	if n := KilledBy("a", Death{}, []client.Request{{Target: "a", Outcome: client.Reset}}); n != 0 {
		t.Errorf("no SIGKILL: %d killed, want 0", n)
	}
}

func TestTableMarksDisagreement(t *testing.T) {
	rs := []Result{
		{Name: "same", ClientRefused: 44, DrainwatchRefused: 44, Diagnoses: []string{"no_drain_delay"}},
		{Name: "differs", ClientKilled: 3, DrainwatchKilled: 2},
	}
	table := Table(rs)
	if AllAgree(rs) || !strings.Contains(table, "44 / 44") || !strings.Contains(table, "3 / 2") || !strings.Contains(table, "NO") {
		t.Errorf("table:\n%s", table)
	}
	if AllAgree(nil) || !AllAgree(rs[:1]) {
		t.Error("AllAgree: want false for none, true for one agreeing row")
	}
}
