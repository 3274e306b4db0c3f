package advise

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
)

// WorkloadRef names a workload without its revision: advice spans rollouts.
type WorkloadRef struct {
	Namespace string `json:"namespace"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
}

func (w WorkloadRef) String() string { return w.Namespace + "/" + w.Kind + "/" + w.Name }

// SourceLag is one traffic source's routing lag across terminations.
type SourceLag struct {
	Source string `json:"source"`
	Kind   string `json:"kind"`
	Lag    Stat   `json:"lag"`
}

// Advice is what the terminations of one workload measured and, when there
// were enough of them, the values they call for. Why holds the numbers and
// the rule behind each value; Notes what the values do not cover.
type Advice struct {
	Workload WorkloadRef `json:"workload"`
	// Terminations were used; Skipped were not (partial, not yet complete,
	// or a container restart, which routing does not follow).
	Terminations int         `json:"terminations"`
	Skipped      int         `json:"skipped"`
	RoutingLag   Stat        `json:"routing_lag"`
	Sources      []SourceLag `json:"routing_lag_per_source,omitempty"`
	Drain        Stat        `json:"drain"`
	GraceUsed    Stat        `json:"grace_used"`
	// GracePeriod is the longest grace a measured deletion was given.
	GracePeriod Seconds `json:"grace_period_seconds"`
	// DrainCutBySigkill counts terminations whose drain SIGKILL ended.
	DrainCutBySigkill int `json:"drain_cut_by_sigkill"`
	// ResetsOnReuse are requests reset on reused connections; those before
	// the stop signal are the idle-timeout inversion.
	ResetsOnReuse          int `json:"resets_on_reuse"`
	ResetsBeforeStopSignal int `json:"resets_on_reuse_before_stop_signal"`
	// KeepAlive is the idle timeouts the daemons measured on the
	// workload's pods (correlate.KeepAlive, each pod once): the server's
	// idle closes and a pool's reuses of the connections they closed.
	KeepAlive KeepAlive `json:"keep_alive,omitzero"`
	// ServerIdleTimeoutSeconds is the idle timeout the server needs,
	// above every pool's in front of it, when a pool reused a connection
	// the server had closed idle. Not in -o patch: it is the server's own
	// setting.
	ServerIdleTimeoutSeconds int64    `json:"server_idle_timeout_seconds,omitempty"`
	Enough                   bool     `json:"enough"`
	PrestopSleepSeconds      int64    `json:"prestop_sleep_seconds,omitempty"`
	TerminationGraceSeconds  int64    `json:"termination_grace_period_seconds,omitempty"`
	Rule                     string   `json:"rule"`
	Percentile               float64  `json:"percentile"`
	Why                      []string `json:"why"`
	Notes                    []string `json:"notes,omitempty"`

	// From is FromPrometheus for advice from the shipped histograms, which
	// count these instead of the split at the stop signal, of
	// DrainCutBySigkill and of GracePeriod; empty for the daemons'.
	From                      string `json:"from,omitempty"`
	ResetsOutsideTerminations int    `json:"resets_on_reuse_outside_terminations,omitempty"`
	RequestsKilledBySigkill   int    `json:"requests_killed_by_sigkill,omitempty"`
}

// KeepAlive sums correlate.KeepAlive over a workload's pods.
type KeepAlive struct {
	Pods        int     `json:"pods"`
	IdleCloses  int     `json:"idle_closes"`
	IdleMin     Seconds `json:"server_idle_min_seconds"`
	IdleMax     Seconds `json:"server_idle_max_seconds"`
	PoolReuses  int     `json:"pool_reuses"`
	PoolIdleMax Seconds `json:"pool_idle_max_seconds"`
}

// samples are one workload's measurements before they are summarised.
type samples struct {
	lag, drain, grace []time.Duration
	sources           map[string]*sourceSamples
	// keepAlive is each pod's latest measurements: a pod's terminations
	// (container restarts, then its own) carry its life's so far.
	keepAlive map[string]correlate.KeepAlive
	advice    Advice
}

type sourceSamples struct {
	kind string
	lags []time.Duration
}

// Advise groups terminations by workload and applies the rule to each,
// in workload order.
func Advise(terms []correlate.Termination, r Rule) []Advice {
	by := map[WorkloadRef]*samples{}
	for _, t := range terms {
		ref := refOf(t.Workload)
		s := by[ref]
		if s == nil {
			s = &samples{sources: map[string]*sourceSamples{}, advice: Advice{Workload: ref}}
			by[ref] = s
		}
		s.add(t)
	}
	out := make([]Advice, 0, len(by))
	for _, s := range by {
		out = append(out, s.apply(r))
	}
	slices.SortFunc(out, func(a, b Advice) int { return cmp.Compare(a.Workload.String(), b.Workload.String()) })
	return out
}

func refOf(w collector.Workload) WorkloadRef {
	return WorkloadRef{Namespace: w.Namespace, Kind: w.Kind, Name: w.Name}
}

// usable says whether a termination measures what the rule needs: a whole
// (complete, not partial) stop of the pod, not a container restart.
func usable(t correlate.Termination) bool {
	return t.Complete && !t.Partial && t.Container == ""
}

func (s *samples) add(t correlate.Termination) {
	a := &s.advice
	if k := t.KeepAlive; k.IdleCloses > 0 && k.IdleCloses >= s.keepAlive[t.PodUID].IdleCloses {
		if s.keepAlive == nil {
			s.keepAlive = map[string]correlate.KeepAlive{}
		}
		s.keepAlive[t.PodUID] = k
	}
	if !usable(t) {
		a.Skipped++
		return
	}
	a.Terminations++
	d := t.Durations()
	if lag, ok := lagOf(t); ok {
		s.lag = append(s.lag, lag)
	}
	if v, ok := d[correlate.DurDrain]; ok {
		s.drain = append(s.drain, v)
	}
	if v, ok := d[correlate.DurGraceUsed]; ok {
		s.grace = append(s.grace, v)
	}
	if !t.Marks.Sigkill.IsZero() {
		a.DrainCutBySigkill++
	}
	a.GracePeriod = max(a.GracePeriod, Seconds(t.GracePeriod))
	a.ResetsOnReuse += t.Counts.RequestsResetOnReusedConnections
	a.ResetsBeforeStopSignal += t.Counts.RequestsResetOnReusedConnections - t.ReuseResets.AfterStopSignal
	for _, src := range t.RoutingSources {
		if src.Last.IsZero() {
			continue
		}
		ss := s.sources[src.Source]
		if ss == nil {
			ss = &sourceSamples{kind: src.Kind}
			s.sources[src.Source] = ss
		}
		ss.lags = append(ss.lags, src.Lag)
	}
}

// lagOf is a termination's routing lag sample: routing_lag_observed, or 0
// when traffic came only before endpoints_not_ready (routing had already
// converged). A termination without the mark, or with no connection
// attempt at all, measured nothing. Blackholed attempts (sent after the
// pod's network was gone) were sent no later than their drop, which can
// come up to a neighbour's resolution (3 s) after the SYN: when the last
// drop is later than the last attempt the pod saw, it is the sample, an
// upper bound of when routing still sent, so the sleep errs long.
func lagOf(t correlate.Termination) (time.Duration, bool) {
	nr := t.Marks.EndpointsNotReady
	if nr.IsZero() {
		return 0, false
	}
	if last := t.LastBlackholed; t.Counts.ConnectionsBlackholed > 0 && last.After(t.LastConnAttempt) {
		return max(last.Sub(nr), 0), true
	}
	if t.LastConnAttempt.IsZero() {
		return 0, false
	}
	lag, ok := t.RoutingLag()
	if !ok {
		return 0, true
	}
	return lag, true
}

func (s *samples) apply(r Rule) Advice {
	a := s.advice
	a.Rule, a.Percentile = r.String(), r.Percentile
	a.RoutingLag = newStat(s.lag, r.Percentile)
	a.Drain = newStat(s.drain, r.Percentile)
	a.GraceUsed = newStat(s.grace, r.Percentile)
	for name, ss := range s.sources {
		a.Sources = append(a.Sources, SourceLag{Source: name, Kind: ss.kind, Lag: newStat(ss.lags, r.Percentile)})
	}
	slices.SortFunc(a.Sources, func(x, y SourceLag) int {
		return cmp.Or(cmp.Compare(y.Lag.P, x.Lag.P), cmp.Compare(x.Source, y.Source))
	})
	for _, k := range s.keepAlive {
		ka := &a.KeepAlive
		if ka.Pods == 0 || Seconds(k.IdleMin) < ka.IdleMin {
			ka.IdleMin = Seconds(k.IdleMin)
		}
		ka.Pods++
		ka.IdleCloses += k.IdleCloses
		ka.IdleMax = max(ka.IdleMax, Seconds(k.IdleMax))
		ka.PoolReuses += k.PoolReuses
		ka.PoolIdleMax = max(ka.PoolIdleMax, Seconds(k.PoolIdleMax))
	}
	recommend(&a, r)
	return a
}

// String states the rule as docs/advise.md writes it.
func (r Rule) String() string {
	return fmt.Sprintf("p%g over at least %d terminations, margin %s", r.Percentile, r.MinTerminations, correlate.FormatSeconds(r.Margin))
}
