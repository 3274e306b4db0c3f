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
		{Name: "probes differ", ProberProbeRefused: 7, DrainwatchProbeRefused: 6},
		{Name: "resets differ", ClientResetAtShutdown: 5, DrainwatchResetAtShutdown: 4},
		{Name: "reuse differs", ProxyResetOnReuse: 9, DrainwatchResetOnReuse: 8},
		{Name: "exit differs", ClientKilledAtExit: 4, DrainwatchKilledAtExit: 1},
		{Name: "inside differs", ProxyRefusedInside: 6, DrainwatchRefusedInside: 5},
	}
	table := Table(rs)
	if AllAgree(rs) || !strings.Contains(table, "44 / 44") || !strings.Contains(table, "3 / 2") || !strings.Contains(table, "NO") ||
		!strings.Contains(table, "7 / 6") || !strings.Contains(table, "5 / 4") || !strings.Contains(table, "probe refused prober/drainwatch") ||
		!strings.Contains(table, "9 / 8") || !strings.Contains(table, "reset on reuse proxy/drainwatch") ||
		!strings.Contains(table, "4 / 1") || !strings.Contains(table, "killed at exit clients/drainwatch") ||
		!strings.Contains(table, "6 / 5") || !strings.Contains(table, "refused inside the pod proxy/drainwatch") {
		t.Errorf("table:\n%s", table)
	}
	for _, r := range rs[1:] {
		if r.Agree() {
			t.Errorf("%s agrees", r.Name)
		}
	}
	if AllAgree(nil) || !AllAgree(rs[:1]) {
		t.Error("AllAgree: want false for none, true for one agreeing row")
	}
}

// TestResetAtShutdown pins the clients' definition of a connection reset by
// the shutdown of a live server.
func TestResetAtShutdown(t *testing.T) {
	kill := Death{SIGKILL: time.Unix(100, 0), Exit: time.Unix(100, 0).Add(5 * time.Millisecond)}
	at := func(s float64) time.Time { return time.Unix(0, 0).Add(time.Duration(s * float64(time.Second))) }
	cases := []struct {
		name    string
		d       Death
		end     float64
		outcome client.Outcome
		err     string
		want    bool
	}{
		{"reset in the accept queue", Death{}, 50, client.Reset, "read: connection reset by peer", true},
		{"half-open handshake, write failed", Death{}, 50, client.Reset, "write tcp: broken pipe", true},
		{"closed unanswered", Death{}, 50, client.EOF, "EOF", true},
		{"refused", Death{}, 50, client.Refused, "", false},
		{"answered", Death{}, 50, client.OK, "", false},
		{"reset before the SIGKILL", kill, 99, client.Reset, "read: connection reset by peer", true},
		{"killed by the SIGKILL", kill, 100.001, client.Reset, "read: connection reset by peer", false},
		{"write failed at the SIGKILL", kill, 100.001, client.Reset, "write tcp: broken pipe", false},
	}
	for _, tc := range cases {
		r := client.Request{Target: "a", Start: at(tc.end - 0.5), End: at(tc.end), Outcome: tc.outcome, Err: tc.err}
		if got := ResetAtShutdown(r, tc.d); got != tc.want {
			t.Errorf("%s: reset at shutdown = %v, want %v", tc.name, got, tc.want)
		}
		if n := ResetAtShutdownTo("b", tc.d, []client.Request{r}); n != 0 {
			t.Errorf("%s: another target counted", tc.name)
		}
	}
}

// TestKilledAtExit pins the clients' definition of a request cut by the
// exit of a server that does not drain, and that such a cut is never also
// a reset at shutdown.
func TestKilledAtExit(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(0, 0).Add(time.Duration(s * float64(time.Second))) }
	dies := Death{StopSignal: at(100), Exit: at(100.01), NoDrain: true}
	cases := []struct {
		name    string
		d       Death
		start   float64
		end     float64
		outcome client.Outcome
		err     string
		want    bool
	}{
		{"empty reply at the exit", dies, 90, 100.005, client.EOF, "EOF", true},
		{"reset at the exit", dies, 90, 100.005, client.Reset, "read: connection reset by peer", true},
		{"answered before it", dies, 90, 99, client.OK, "", false},
		{"cut before the stop signal", dies, 90, 99.9, client.EOF, "EOF", false},
		{"started after the exit", dies, 100.02, 100.03, client.Reset, "read: connection reset by peer", false},
		{"write failed", dies, 90, 100.005, client.Reset, "write tcp: broken pipe", false},
		{"refused", dies, 100.005, 100.006, client.Refused, "", false},
		{"a server that drains", Death{StopSignal: at(100), Exit: at(100.01)}, 90, 100.005, client.EOF, "EOF", false},
		{"SIGKILL's, not the exit's", Death{StopSignal: at(100), SIGKILL: at(100.001), Exit: at(100.01), NoDrain: true}, 90, 100.005, client.EOF, "EOF", false},
	}
	for _, tc := range cases {
		r := client.Request{Target: "a", Start: at(tc.start), End: at(tc.end), Outcome: tc.outcome, Err: tc.err}
		if got := KilledAtExit(r, tc.d); got != tc.want {
			t.Errorf("%s: killed at exit = %v, want %v", tc.name, got, tc.want)
		}
		if tc.want && (ResetAtShutdown(r, tc.d) || Killed(r, tc.d)) {
			t.Errorf("%s: also counted as reset at shutdown or killed by SIGKILL", tc.name)
		}
		if n := KilledAtExitTo("b", tc.d, []client.Request{r}); n != 0 {
			t.Errorf("%s: another target counted", tc.name)
		}
	}
}
