package correlate

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// Requests killed at exit: a server holds four requests (cookies 31–34)
// when SIGTERM comes at 0 and ends in one of the ways a server ends; the
// pod is gone at 5 s.
const serverPID = initPID + 1

var exitCookies = []uint64{31, 32, 33, 34}

func exitScenario(steps ...any) []any {
	grace := 30 * time.Second
	evs := []any{
		born(podA, ipA, netA, cgA, grace, ms(-60000)),
		openListener(netA, ms(-59000)),
	}
	for i, c := range exitCookies {
		evs = append(evs, accept(netA, c, ms(-400+10*i)))
	}
	evs = append(evs, deleting(podA, ipA, grace, ms(-20), ms(-10)), killing(podA, ms(-5)),
		signal(cgA, initPID, 15, true, "server", ms(0)), notReady(podA, ms(1)))
	return append(append(evs, steps...), gone(podA, ms(5000)))
}

// exitOf is the exit of pid named comm; its in-flight connections close
// right after it with cause.
func exitOf(pid uint32, comm string, code int32, sig uint32, at time.Time, cause collector.CloseCause) []any {
	e := exited(cgA, pid, code, sig, pid == initPID, at)
	copy(e.Comm[:], comm)
	evs := []any{e}
	for _, c := range exitCookies {
		evs = append(evs, inflight(netA, pid, c, cause, at))
	}
	return evs
}

// queued is a connection reset in the accept queue at exit (not in flight).
func queued(pid uint32, cookie uint64, cause collector.CloseCause, at time.Time) collector.Event {
	e := inflight(netA, pid, cookie, cause, at)
	e.Inflight = collector.InflightNone
	return e
}

func flat(parts ...any) []any {
	var out []any
	for _, p := range parts {
		if evs, ok := p.([]any); ok {
			out = append(out, evs...)
		} else {
			out = append(out, p)
		}
	}
	return out
}

func TestRequestsKilledAtExit(t *testing.T) {
	tests := []struct {
		name    string
		events  []any
		counts  Counts
		death   string
		codes   []string
		outcome string
		text    string
	}{
		{name: "node under tini dies of SIGTERM (no handler)",
			events: exitScenario(flat(exitOf(serverPID, "node", 143, 15, ms(2), collector.CauseSignal),
				queued(serverPID, 35, collector.CauseSignal, ms(2)),
				reset(netA, serverPID, 31, ms(2)), // the close's RST: counted once
				closeListener(netA, ms(2)),
				exited(cgA, initPID, 143, 0, true, ms(3)))...),
			counts: Counts{RequestsKilledAtExit: 4, InflightAtStopSignal: 4, ConnectionsResetAtExit: 1},
			death:  DeathStopSignal, codes: []string{DiagNoDrainDelay, DiagStopSignalKills}, outcome: OutcomeKilled,
			text: "node (pid 4101) died of SIGTERM 0.002s after the stop signal (no handler: the signal's default action) with 4 requests in flight"},
		{name: "Go without signal.Notify as PID 1 exits 2 at once",
			events: exitScenario(flat(exitOf(initPID, "server", 2, 0, ms(3), collector.CauseClose), closeListener(netA, ms(3)))...),
			counts: Counts{RequestsKilledAtExit: 4, InflightAtStopSignal: 4},
			death:  DeathNoDrain, codes: []string{DiagNoDrainDelay, DiagStopSignalKills}, outcome: OutcomeKilled,
			text: "server (pid 4100) exited with code 2 0.003s after the stop signal (its listener open until the exit: no drain) with 4 requests in flight"},
		{name: "Shutdown's timeout shorter than the slow handler",
			events: exitScenario(flat(closeListener(netA, ms(1500)), exitOf(initPID, "server", 0, 0, ms(2500), collector.CauseClose))...),
			counts: Counts{RequestsKilledAtExit: 4, InflightAtStopSignal: 4},
			death:  DeathAfterShutdown, codes: []string{DiagExitedInflight}, outcome: OutcomeKilled,
			text: "server (pid 4100) exited with code 0 2.5s after the stop signal (its listener closed 1s before the exit: a shutdown ran) with 4 requests in flight"},
		{name: "SIGSEGV during the drain",
			events: exitScenario(flat(exitOf(initPID, "server", 139, 11, ms(1200), collector.CauseSignal), closeListener(netA, ms(1200)))...),
			counts: Counts{RequestsKilledAtExit: 4, InflightAtStopSignal: 4},
			death:  DeathCrash, codes: []string{DiagCrashedDuringDrain}, outcome: OutcomeKilled},
		{name: "a handled signal, then exit 2 (a panic) 3 s later, the listener open",
			events: exitScenario(flat(exitOf(initPID, "server", 2, 0, ms(3000), collector.CauseClose), closeListener(netA, ms(3000)))...),
			counts: Counts{RequestsKilledAtExit: 4, InflightAtStopSignal: 4},
			death:  DeathCrash, codes: []string{DiagCrashedDuringDrain}, outcome: OutcomeKilled},
		{name: "a handler that waits, then exits 0 without a shutdown",
			events: exitScenario(flat(exitOf(initPID, "server", 0, 0, ms(3000), collector.CauseClose), closeListener(netA, ms(3000)))...),
			counts: Counts{RequestsKilledAtExit: 4, InflightAtStopSignal: 4},
			death:  DeathNoDrain, codes: []string{DiagStopSignalKills}, outcome: OutcomeKilled},
		{name: "SIGKILL stays requests_killed_by_sigkill",
			events: exitScenario(flat(signal(cgA, initPID, 9, true, "server", ms(3000)),
				exitOf(initPID, "server", 137, 9, ms(3001), collector.CauseSigkill), closeListener(netA, ms(3001)))...),
			counts: Counts{RequestsKilledBySigkill: 4, InflightAtStopSignal: 4},
			death:  DeathSigkill, codes: []string{DiagStopSignalIgnored, DiagRequestsKilled}, outcome: OutcomeKilled},
		{name: "idle at exit: reset, not killed",
			events: exitScenario(exited(cgA, initPID, 143, 15, true, ms(1200)), reset(netA, initPID, 36, ms(1200)),
				queued(initPID, 35, collector.CauseSignal, ms(1200)), closeListener(netA, ms(1200))),
			counts: Counts{ConnectionsResetAtExit: 2},
			death:  DeathStopSignal, codes: []string{DiagResetAtExit}, outcome: OutcomeReset},
		{name: "crash with no stop signal seen yet (during the preStop)",
			events: exitScenario(flat(exitOf(initPID, "server", 134, 6, ms(-3), collector.CauseSignal), closeListener(netA, ms(-3)))...),
			counts: Counts{RequestsKilledAtExit: 4},
			death:  DeathCrash, codes: []string{DiagNoDrainDelay, DiagCrashedDuringDrain}, outcome: OutcomeKilled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := finish(t, New(Config{}), tc.events, ms(30000))
			if got.Counts != tc.counts {
				t.Errorf("counts = %+v, want %+v", got.Counts, tc.counts)
			}
			if got.Death.Kind != tc.death {
				t.Errorf("death = %+v, want kind %s", got.Death, tc.death)
			}
			if !slices.Equal(codes(got), tc.codes) {
				t.Errorf("diagnoses = %v, want %v\n%+v", codes(got), tc.codes, got.Diagnoses)
			}
			if got.Outcome != tc.outcome {
				t.Errorf("outcome = %q, want %q", got.Outcome, tc.outcome)
			}
			if tc.text != "" && DeathText(got) != tc.text {
				t.Errorf("death text = %q\nwant          %q", DeathText(got), tc.text)
			}
			for _, d := range got.Diagnoses {
				if d.Code != DiagClean && d.Code != DiagNoDrainDelay && !strings.Contains(d.Message, "requests in flight") &&
					d.Code != DiagStopSignalIgnored && d.Code != DiagRequestsKilled && d.Code != DiagResetAtExit {
					t.Errorf("%s: %q names no count", d.Code, d.Message)
				}
			}
		})
	}
}

// A crash of a container the pod keeps (no deletion) is container_crashed,
// which counts the requests killed at exit; no second diagnosis.
func TestContainerCrashCountsKilledAtExit(t *testing.T) {
	d := killedAtExit(Termination{Counts: Counts{RequestsKilledAtExit: 2}, Death: Death{Kind: DeathCrash}},
		&Diagnosis{Code: DiagContainerCrashed})
	if d != nil {
		t.Errorf("killedAtExit = %+v beside container_crashed, want nil", d)
	}
	if got := lost(Termination{Counts: Counts{RequestsKilledAtExit: 2, RequestsKilledBySigkill: 1}}); got != "0 connections refused, 3 requests killed in flight" {
		t.Errorf("lost = %q", got)
	}
}

// The timeline says how the server ended when it killed requests or ended
// without a shutdown; a drained exit says nothing more than its code.
func TestDeathNotable(t *testing.T) {
	for _, tc := range []struct {
		kind   string
		killed int
		want   bool
	}{
		{DeathAfterShutdown, 0, false}, {DeathAfterShutdown, 2, true}, {DeathSigkill, 0, false},
		{DeathExit, 0, false}, {DeathStopSignal, 0, true}, {DeathNoDrain, 0, true}, {DeathCrash, 0, true}, {"", 0, false},
	} {
		tm := Termination{Death: Death{Kind: tc.kind}, Counts: Counts{RequestsKilledAtExit: tc.killed}}
		if got := DeathNotable(tm); got != tc.want {
			t.Errorf("DeathNotable(%s, %d killed) = %v, want %v", tc.kind, tc.killed, got, tc.want)
		}
	}
}
