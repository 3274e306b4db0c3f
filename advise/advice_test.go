package advise

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
)

var t0 = time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)

// term is a complete termination of shop/Deployment/web whose routing lag
// is lag (from the router "node n1") and whose drain is drain.
func term(lag, drain time.Duration) correlate.Termination {
	enr := t0.Add(100 * time.Millisecond)
	stop := t0.Add(200 * time.Millisecond)
	return correlate.Termination{
		Workload: collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: "3"},
		Complete: true, GracePeriod: 30 * time.Second, LastConnAttempt: enr.Add(lag),
		Marks:          correlate.Marks{DeleteRequested: t0, Killing: t0.Add(50 * time.Millisecond), EndpointsNotReady: enr, StopSignal: stop, Exit: stop.Add(drain)},
		RoutingSources: []correlate.RoutingSource{{Source: "node n1", Kind: "node", Last: enr.Add(lag), Lag: lag, Refused: 1}},
	}
}

func TestNearestRank(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	for _, c := range []struct {
		samples       []time.Duration
		p             float64
		p50, pv, maxv time.Duration
	}{
		{ms(300, 100, 200), 99, 200 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 90, 5 * time.Millisecond, 9 * time.Millisecond, 10 * time.Millisecond},
		{ms(7), 99, 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond},
	} {
		s := newStat(c.samples, c.p)
		if time.Duration(s.P50) != c.p50 || time.Duration(s.P) != c.pv || time.Duration(s.Max) != c.maxv || s.N != len(c.samples) {
			t.Errorf("%v p%g: %+v", c.samples, c.p, s)
		}
	}
}

func TestAdviseRule(t *testing.T) {
	terms := []correlate.Termination{
		term(1200*time.Millisecond, 300*time.Millisecond),
		term(1520*time.Millisecond, 400*time.Millisecond),
		term(900*time.Millisecond, 2100*time.Millisecond),
	}
	got := Advise(terms, DefaultRule)
	if len(got) != 1 {
		t.Fatalf("%d advices", len(got))
	}
	a := got[0]
	// preStop ⌈1.52 + 1⌉ = 3; grace 3 + ⌈2.1 + 1⌉ = 3 + 4 = 7.
	if !a.Enough || a.PrestopSleepSeconds != 3 || a.TerminationGraceSeconds != 7 {
		t.Fatalf("advice %+v", a)
	}
	if a.RoutingLag.N != 3 || time.Duration(a.RoutingLag.P50) != 1200*time.Millisecond || len(a.Sources) != 1 || a.Sources[0].Lag.N != 3 {
		t.Errorf("stats %+v sources %+v", a.RoutingLag, a.Sources)
	}
	want := "preStop sleep 3 s = ⌈p99 routing lag 1.520s + margin 1.000s⌉ (over 3 terminations; max 1.520s)"
	if a.Why[0] != want {
		t.Errorf("why %q, want %q", a.Why[0], want)
	}
	if a.Why[1] != "terminationGracePeriodSeconds 7 = preStop 3 s + ⌈p99 drain 2.100s + margin 1.000s⌉ (over 3 terminations; max 2.100s)" {
		t.Errorf("why %q", a.Why[1])
	}
	// A wider margin, a lower percentile.
	b := Advise(terms, Rule{MinTerminations: 3, Percentile: 50, Margin: 2 * time.Second})[0]
	if b.PrestopSleepSeconds != 4 || b.TerminationGraceSeconds != 4+3 {
		t.Errorf("p50 margin 2s: %+v", b)
	}
}

func TestAdviseTooFewSaysSoAndAdvisesNothing(t *testing.T) {
	partial := term(time.Second, time.Second)
	partial.Partial = true
	incomplete := term(time.Second, time.Second)
	incomplete.Complete = false
	a := Advise([]correlate.Termination{term(time.Second, time.Second), term(time.Second, time.Second), partial, incomplete}, DefaultRule)[0]
	if a.Enough || a.PrestopSleepSeconds != 0 || a.TerminationGraceSeconds != 0 || a.Skipped != 2 || a.Terminations != 2 {
		t.Fatalf("%+v", a)
	}
	if !strings.HasPrefix(a.Why[0], "too few terminations to advise: routing lag measured in 2, drain in 2, the rule wants 3") {
		t.Errorf("why %q", a.Why)
	}
	if p, _, _ := Patch(a, corev1.PodSpec{}, true); p != nil {
		t.Errorf("patch %s for too few", p)
	}
}

func TestAdviseNoTrafficAfterTheMarkIsZeroLag(t *testing.T) {
	quiet := term(0, time.Second)
	quiet.LastConnAttempt = t0 // before endpoints_not_ready
	none := term(0, time.Second)
	none.LastConnAttempt = time.Time{}
	a := Advise([]correlate.Termination{quiet, quiet, quiet, none}, DefaultRule)[0]
	if a.RoutingLag.N != 3 || a.RoutingLag.Max != 0 || a.PrestopSleepSeconds != 1 || a.TerminationGraceSeconds != 3 {
		t.Errorf("%+v", a)
	}
}

func TestAdviseNotes(t *testing.T) {
	killed := term(time.Second, 5*time.Second)
	killed.Marks.Sigkill = killed.Marks.Exit
	killed.Counts.RequestsResetOnReusedConnections = 5
	killed.ReuseResets.AfterStopSignal = 2
	a := Advise([]correlate.Termination{killed, term(time.Second, time.Second), term(time.Second, time.Second)}, DefaultRule)[0]
	if a.DrainCutBySigkill != 1 || a.ResetsOnReuse != 5 || a.ResetsBeforeStopSignal != 3 || len(a.Notes) != 3 {
		t.Fatalf("%+v", a)
	}
	if !strings.HasPrefix(a.Notes[1], "3 requests were reset on reused connections before the stop signal: the server's idle timeout is shorter") {
		t.Errorf("notes %q", a.Notes)
	}
}

func TestAdviseGroupsByWorkload(t *testing.T) {
	other := term(time.Second, time.Second)
	other.Workload.Name = "api"
	other.Workload.Revision = "9"
	a := Advise([]correlate.Termination{term(time.Second, time.Second), other, term(time.Second, time.Second)}, DefaultRule)
	if len(a) != 2 || a[0].Workload.Name != "api" || a[1].Workload.Name != "web" || a[1].Terminations != 2 {
		t.Errorf("%+v", a)
	}
	if _, err := json.Marshal(a); err != nil {
		t.Error(err)
	}
}

func TestRuleCheck(t *testing.T) {
	for _, r := range []Rule{{0, 99, 0}, {3, 0, 0}, {3, 101, 0}, {3, 99, -time.Second}} {
		if r.Check() == nil {
			t.Errorf("%+v accepted", r)
		}
	}
	if err := DefaultRule.Check(); err != nil {
		t.Error(err)
	}
}

// TestAdviseBlackholedLag: a naive server's pods saw no attempt after the
// mark (they were gone), but the node dropped SYNs to them until 1.6 s
// after it: that is the lag sample (an upper bound), so the sleep covers
// it; a later attempt the pod saw still wins over an earlier drop.
func TestAdviseBlackholedLag(t *testing.T) {
	gone := term(0, time.Second)
	gone.LastConnAttempt = time.Time{}
	gone.LastBlackholed = gone.Marks.EndpointsNotReady.Add(1600 * time.Millisecond)
	gone.Counts.ConnectionsBlackholed = 12
	seen := term(2*time.Second, time.Second)
	seen.LastBlackholed = seen.Marks.EndpointsNotReady.Add(time.Second)
	seen.Counts.ConnectionsBlackholed = 3
	a := Advise([]correlate.Termination{gone, gone, seen}, DefaultRule)[0]
	if a.RoutingLag.N != 3 || time.Duration(a.RoutingLag.Max) != 2*time.Second || a.PrestopSleepSeconds != 3 {
		t.Errorf("lag %+v, sleep %d; want 3 samples, max 2 s, sleep 3 s", a.RoutingLag, a.PrestopSleepSeconds)
	}
	a = Advise([]correlate.Termination{gone, gone, gone}, DefaultRule)[0]
	if time.Duration(a.RoutingLag.P) != 1600*time.Millisecond || a.PrestopSleepSeconds != 3 {
		t.Errorf("lag %+v, sleep %d; want p99 1.6 s, sleep 3 s", a.RoutingLag, a.PrestopSleepSeconds)
	}
}

// TestAdviseServerIdleTimeout: a pool that reused connections the server
// had closed idle calls for an idle timeout above the longest such reuse,
// from each pod's latest measurements once (pod a's container restart and
// its termination carry the same life), summed over pods.
func TestAdviseServerIdleTimeout(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	withKA := func(t correlate.Termination, pod string, k correlate.KeepAlive) correlate.Termination {
		t.PodUID, t.KeepAlive = pod, k
		return t
	}
	restart := withKA(term(0, 0), "a", correlate.KeepAlive{IdleCloses: 3, IdleMin: ms(5000), IdleMax: ms(5004), PoolReuses: 1, PoolIdleMax: ms(6100)})
	restart.Container = "server"
	terms := []correlate.Termination{
		restart,
		withKA(term(ms(1200), ms(300)), "a", correlate.KeepAlive{IdleCloses: 5, IdleMin: ms(5000), IdleMax: ms(5008), PoolReuses: 2, PoolIdleMax: ms(6995)}),
		withKA(term(ms(1500), ms(400)), "b", correlate.KeepAlive{IdleCloses: 2, IdleMin: ms(4996), IdleMax: ms(5000), PoolReuses: 1, PoolIdleMax: ms(9020)}),
		withKA(term(ms(900), ms(200)), "c", correlate.KeepAlive{}),
	}
	got := Advise(terms, DefaultRule)[0]
	want := KeepAlive{Pods: 2, IdleCloses: 7, IdleMin: Seconds(ms(4996)), IdleMax: Seconds(ms(5008)), PoolReuses: 3, PoolIdleMax: Seconds(ms(9020))}
	if got.KeepAlive != want || got.ServerIdleTimeoutSeconds != 11 {
		t.Errorf("keep-alive %+v, server idle timeout %d; want %+v, 11 = ⌈9.020 + 1⌉", got.KeepAlive, got.ServerIdleTimeoutSeconds, want)
	}
	const why = "server keep-alive idle timeout 11 s = ⌈longest pool idle 9.020s + margin 1.000s⌉ (3 requests reset on reuse of connections the server had closed after 4.996s to 5.008s idle; not in the patch: the server's own setting)"
	if len(got.Why) != 3 || got.Why[2] != why {
		t.Errorf("why %q, want its third %q", got.Why, why)
	}
	var b strings.Builder
	if err := WriteText(&b, []Advice{got}); err != nil {
		t.Fatal(err)
	}
	if line := "  keep-alive: the server closed 7 idle connections of 2 pods after 4.996s to 5.008s idle; a pool reused 3 of them, the longest 9.020s after its last data\n"; !strings.Contains(b.String(), line) {
		t.Errorf("text lacks %q:\n%s", line, b.String())
	}
	// The timeout rests on the pool's reuses, not on the terminations: one
	// termination is too few for the sleep, not for it.
	if got := Advise(terms[2:3], DefaultRule)[0]; got.Enough || got.ServerIdleTimeoutSeconds != 11 || len(got.Why) != 2 {
		t.Errorf("one termination: enough %v, server idle timeout %d, why %q; want not enough, 11, too few and the timeout",
			got.Enough, got.ServerIdleTimeoutSeconds, got.Why)
	}
	// Idle closes without a pool's reuse: no timeout to advise.
	quiet := []correlate.Termination{terms[3], terms[3],
		withKA(term(ms(900), ms(200)), "d", correlate.KeepAlive{IdleCloses: 4, IdleMin: ms(5000), IdleMax: ms(5000)})}
	if got := Advise(quiet, DefaultRule)[0]; !got.Enough || got.ServerIdleTimeoutSeconds != 0 || len(got.Why) != 2 {
		t.Errorf("idle closes without reuse: enough %v, server idle timeout %d, why %q; want enough, 0, the sleep and grace only",
			got.Enough, got.ServerIdleTimeoutSeconds, got.Why)
	}
}
