package correlate

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// rst is a RST of the pod's kernel on the connection cookie with the
// kernel's reason, sent in softirq (no process).
func rst(cookie uint64, reason uint32, at time.Time) collector.Event {
	e := sock(collector.EventReset, netA, ipA, cookie, at)
	e.Reason = reason
	return e
}

const (
	reasonNoSocket     = 1
	reasonAbortOnData  = 8
	reasonTimewait     = 9
	reasonAbortOnClose = 11
)

// TestResetOnReusedConnections: which RSTs during a termination are
// requests reset on reused connections, and that none is also counted as a
// reset at shutdown or at exit. The base is the seeds' protocol server
// (stop signal at 0, listener closed at +1.5 s, exit at +2.41 s).
func TestResetOnReusedConnections(t *testing.T) {
	loopback := rst(40, reasonAbortOnData, ms(1600))
	loopback.Local, loopback.Remote = netip.MustParseAddrPort("127.0.0.1:8080"), netip.MustParseAddrPort("127.0.0.1:50000")
	for _, tc := range []struct {
		name              string
		steps             []any
		reuse, after      int
		reasons           map[string]int
		shutdown, atExit  int
		wantDiag, outcome string
	}{
		{name: "orphan and timewait after the stop signal",
			steps: []any{rst(11, reasonAbortOnData, ms(1600)), rst(12, reasonTimewait, ms(1700)), rst(13, reasonTimewait, ms(1800))},
			reuse: 3, after: 3, reasons: map[string]int{"TCP_ABORT_ON_DATA": 1, "TCP_TIMEWAIT_SOCKET": 2}, wantDiag: DiagResetOnReuse, outcome: OutcomeReset},
		{name: "idle timeout before the stop signal",
			steps: []any{rst(11, reasonTimewait, ms(-3)), rst(12, reasonTimewait, ms(-2)), rst(13, reasonAbortOnData, ms(100))},
			reuse: 3, after: 1, reasons: map[string]int{"TCP_ABORT_ON_DATA": 1, "TCP_TIMEWAIT_SOCKET": 2}, wantDiag: DiagResetOnReuse, outcome: OutcomeReset},
		{name: "one connection counts once",
			steps: []any{rst(11, reasonAbortOnData, ms(1600)), rst(11, reasonTimewait, ms(1601))},
			reuse: 1, after: 1, reasons: map[string]int{"TCP_ABORT_ON_DATA": 1}, wantDiag: DiagResetOnReuse, outcome: OutcomeReset},
		{name: "closed with a request unanswered: reset at shutdown, its later RST not again",
			steps:    []any{inflight(netA, initPID, 11, collector.CauseClose, ms(1550)), rst(11, reasonAbortOnData, ms(1600))},
			shutdown: 1, outcome: OutcomeReset},
		{name: "abort on close is not a reuse",
			steps:    []any{exited(cgA, initPID+1, 0, 0, false, ms(2000)), func() collector.Event { e := rst(11, reasonAbortOnClose, ms(2000)); e.PID = initPID + 1; return e }()},
			atExit:   1,
			wantDiag: DiagResetAtExit, outcome: OutcomeReset},
		{name: "no socket after the listener closed is a reset at shutdown",
			steps:    []any{rst(0, reasonNoSocket, ms(1600))},
			shutdown: 1, outcome: OutcomeReset},
		{name: "kernel without reasons counts none",
			steps:    []any{rst(11, 0, ms(1600))},
			wantDiag: DiagClean, outcome: OutcomeClean},
		{name: "between the pod's own containers",
			steps:    []any{loopback},
			wantDiag: DiagClean, outcome: OutcomeClean},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs := protocol(false)
			// Before the exit and the removal.
			evs = append(append(slices.Clone(evs[:len(evs)-2]), tc.steps...), evs[len(evs)-2:]...)
			got := finish(t, New(Config{}), evs, ms(60000))
			c := got.Counts
			if c.RequestsResetOnReusedConnections != tc.reuse || got.ReuseResets.AfterStopSignal != tc.after ||
				c.ConnectionsResetAtShutdown != tc.shutdown || c.ConnectionsResetAtExit != tc.atExit {
				t.Errorf("reuse %d (after stop %d), at shutdown %d, at exit %d; want %d (%d), %d, %d",
					c.RequestsResetOnReusedConnections, got.ReuseResets.AfterStopSignal, c.ConnectionsResetAtShutdown,
					c.ConnectionsResetAtExit, tc.reuse, tc.after, tc.shutdown, tc.atExit)
			}
			if len(got.ReuseResets.Reasons) != len(tc.reasons) {
				t.Errorf("reasons %v, want %v", got.ReuseResets.Reasons, tc.reasons)
			}
			for r, n := range tc.reasons {
				if got.ReuseResets.Reasons[r] != n {
					t.Errorf("reasons %v, want %v", got.ReuseResets.Reasons, tc.reasons)
				}
			}
			if got.Outcome != tc.outcome {
				t.Errorf("outcome %q, want %q", got.Outcome, tc.outcome)
			}
			if tc.wantDiag != "" && diagnosis(got, tc.wantDiag).Code == "" {
				t.Errorf("diagnoses %v, want %s", codes(got), tc.wantDiag)
			}
			if tc.reuse == 0 && diagnosis(got, DiagResetOnReuse).Code != "" {
				t.Errorf("diagnoses %v: %s without resets on reuse", codes(got), DiagResetOnReuse)
			}
		})
	}
}

// TestResetOnReuseFix: the fix follows the cause that dominates — the
// shutdown closing idle connections before routing converged (a drain
// delay, Connection: close) or an idle timeout shorter than the proxy's.
func TestResetOnReuseFix(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []any
		msg   string
		fix   string
	}{
		{"shutdown", []any{rst(11, reasonTimewait, ms(1600)), rst(12, reasonTimewait, ms(1601))},
			"2 requests arrived on keep-alive connections the server had already closed and were reset (RST reason TCP_TIMEWAIT_SOCKET 2; 2 after the stop signal, 0 before it): a proxy with a connection pool answers each with a 502",
			"keep serving keep-alive connections until routing has converged (preStop sleep, a drain delay: external 10.244.2.9 still sent 1.3s after the endpoint became not ready), then answer with `Connection: close` instead of closing idle connections under the proxy; keep the proxy's upstream idle timeout shorter than the server's"},
		{"idle timeout", []any{rst(11, reasonAbortOnData, ms(-5))},
			"1 requests arrived on keep-alive connections the server had already closed and were reset (RST reason TCP_ABORT_ON_DATA 1; 0 after the stop signal, 1 before it): a proxy with a connection pool answers each with a 502",
			"make the server's keep-alive idle timeout longer than every upstream pool's (Go http.Server.IdleTimeout > nginx keepalive_timeout / haproxy timeout http-keep-alive / Envoy idle_timeout)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs := protocol(false)
			evs = append(append(slices.Clone(evs[:len(evs)-2]), tc.steps...), evs[len(evs)-2:]...)
			d := diagnosis(finish(t, New(Config{}), evs, ms(60000)), DiagResetOnReuse)
			if d.Message != tc.msg || d.Fix != tc.fix {
				t.Errorf("diagnosis\n%q\n%q\nwant\n%q\n%q", d.Message, d.Fix, tc.msg, tc.fix)
			}
		})
	}
}

// TestResetOnReuseOutsideTerminations: resets on reused connections of a
// pod that is not terminating count for its workload (no revision), are
// taken once, survive a snapshot, and never reach a later termination.
func TestResetOnReuseOutsideTerminations(t *testing.T) {
	c := New(Config{})
	feed(c, []any{
		born(podA, ipA, netA, cgA, 30*time.Second, ms(-60000)),
		openListener(netA, ms(-59000)),
		rst(21, reasonTimewait, ms(-30000)), rst(22, reasonAbortOnData, ms(-20000)),
		rst(23, reasonAbortOnClose, ms(-15000)), rst(0, reasonNoSocket, ms(-14000)),
	})
	want := []WorkloadCount{{Workload: collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web"}, N: 2}}
	s, err := c.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	restored := New(Config{})
	if err := restored.Restore(s); err != nil {
		t.Fatal(err)
	}
	for name, cc := range map[string]*Correlator{"live": c, "restored": restored} {
		if got := cc.TakeSteadyReuseResets(); !slices.Equal(got, want) {
			t.Errorf("%s: steady resets on reuse %v, want %v", name, got, want)
		}
		if got := cc.TakeSteadyReuseResets(); len(got) != 0 {
			t.Errorf("%s: taken twice: %v", name, got)
		}
	}
	evs := protocol(false)
	got := finish(t, c, evs[2:], ms(60000))
	if got.Counts.RequestsResetOnReusedConnections != 0 {
		t.Errorf("termination counted %d resets on reuse from before it, want 0", got.Counts.RequestsResetOnReusedConnections)
	}
}

// TestResetOnReuseBeforeTheTerminationOpens: a reset on reuse processed
// before the deletion (though after it was requested) was counted for the
// workload; the termination's replay of early events does not count it again.
func TestResetOnReuseBeforeTheTerminationOpens(t *testing.T) {
	c := New(Config{})
	grace := 30 * time.Second
	feed(c, []any{born(podA, ipA, netA, cgA, grace, ms(-60000)), openListener(netA, ms(-59000)),
		rst(21, reasonTimewait, ms(-15))})
	got := finish(t, c, []any{
		deleting(podA, ipA, grace, ms(-20), ms(-10)),
		signal(cgA, initPID, 15, true, "server", ms(0)),
		rst(22, reasonTimewait, ms(10)),
		closeListener(netA, ms(5)), exited(cgA, initPID, 0, 0, true, ms(400)), gone(podA, ms(600)),
	}, ms(60000))
	steady := c.TakeSteadyReuseResets()
	if got.Counts.RequestsResetOnReusedConnections != 1 || len(steady) != 1 || steady[0].N != 1 {
		t.Errorf("termination %d, steady %v; want 1 and 1", got.Counts.RequestsResetOnReusedConnections, steady)
	}
}

// idleClosed is the pod's server closing the idle connection cookie after
// idleMs without data.
func idleClosed(cookie uint64, idleMs uint32, at time.Time) collector.Event {
	e := sock(collector.EventIdleClose, netA, ipA, cookie, at)
	e.Seq, e.PID, e.Cause = idleMs, initPID, collector.CauseClose
	return e
}

// TestKeepAliveIdleTimeouts: the server's idle closes before the stop
// signal and the resets on reuse that follow them measure both idle
// timeouts: the pool held connection 11 idle -5 − (-2000 − 5000) = 6995
// ms, connection 12 -4 − (-1900 − 5004) = 6900 ms. The shutdown's close
// of connection 13 after the stop signal, its reset, a second RST of
// connection 11 (its timewait socket's) and a reset whose close was not
// seen (14) measure nothing; the fix names the numbers.
func TestKeepAliveIdleTimeouts(t *testing.T) {
	evs := protocol(false)
	steps := []any{
		idleClosed(11, 5000, ms(-2000)), idleClosed(12, 5004, ms(-1900)),
		rst(11, reasonAbortOnData, ms(-5)), rst(11, reasonTimewait, ms(-4)), rst(12, reasonTimewait, ms(-4)), rst(14, reasonTimewait, ms(-3)),
		idleClosed(13, 3000, ms(200)), rst(13, reasonTimewait, ms(1600)),
	}
	evs = append(append(slices.Clone(evs[:len(evs)-2]), steps...), evs[len(evs)-2:]...)
	got := finish(t, New(Config{}), evs, ms(60000))
	want := KeepAlive{IdleCloses: 2, IdleMin: 5000 * time.Millisecond, IdleMax: 5004 * time.Millisecond, PoolReuses: 2, PoolIdleMax: 6995 * time.Millisecond}
	if got.KeepAlive != want {
		t.Errorf("keep-alive %+v, want %+v", got.KeepAlive, want)
	}
	d := diagnosis(got, DiagResetOnReuse)
	const fix = "make the server's keep-alive idle timeout longer than every upstream pool's (Go http.Server.IdleTimeout > nginx keepalive_timeout / haproxy timeout http-keep-alive / Envoy idle_timeout)" +
		": the server closed idle connections after 5.000s to 5.004s, a pool reused one 6.995s after its last data (2 such resets); the server's timeout must exceed 6.995s"
	if d.Fix != fix {
		t.Errorf("fix\n%q\nwant\n%q", d.Fix, fix)
	}
}
