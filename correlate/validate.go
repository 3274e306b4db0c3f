package correlate

import (
	"errors"
	"fmt"
	"reflect"
	"time"
)

// Bounds a restored state holds. A state file is input: one planted or
// damaged must not make the daemon crash (a ring index out of range
// panics at the next event), count backwards (a negative count is a
// Prometheus counter's panic) or hold more than a node produces. The
// bounds are far above what a node makes (110 pods by default).
const (
	maxRestoredPods      = 1 << 14
	maxRestoredCompleted = 1 << 20
	maxRestoredGaps      = 1 << 12
	maxRestoredConnPts   = 1 << 16 // Config.MaxConnPoints is 2048 by default
	maxRestoredRows      = 1 << 12 // sources, routing sources, diagnoses, reasons
	// restoredSkew is how far past the clock a restored time may be: the
	// node's clock may have been stepped back since it was saved.
	restoredSkew = 24 * time.Hour
)

// saneTime reports whether t is unset or between the Unix epoch and now
// plus restoredSkew.
func saneTime(t, now time.Time) bool {
	return t.IsZero() || (!t.Before(time.Unix(0, 0)) && !t.After(now.Add(restoredSkew)))
}

// Check reports whether a State read back from disk is one this
// correlator can restore and run on; now is the restoring clock.
func (s State) Check(now time.Time) error {
	if len(s.Pods) > maxRestoredPods || len(s.Completed) > maxRestoredCompleted || len(s.Gaps) > maxRestoredGaps {
		return fmt.Errorf("%d pods, %d completed, %d gaps: more than a node holds", len(s.Pods), len(s.Completed), len(s.Gaps))
	}
	var errs []error
	for uid, p := range s.Pods {
		if err := p.check(uid, now); err != nil {
			errs = append(errs, fmt.Errorf("pod uid %q: %w", uid, err))
		}
	}
	for uid, at := range s.Completed {
		if !saneTime(at, now) {
			errs = append(errs, fmt.Errorf("completed pod uid %q at %s", uid, at))
		}
	}
	for _, g := range s.Gaps {
		if !saneTime(g.From, now) || !saneTime(g.To, now) || (!g.To.IsZero() && g.To.Before(g.From)) {
			errs = append(errs, fmt.Errorf("gap %s from %s to %s", g.Reason, g.From, g.To))
		}
	}
	for _, wc := range s.SteadyReuse {
		if wc.N < 0 {
			errs = append(errs, fmt.Errorf("steady resets of %s: %d", wc.Workload.Name, wc.N))
		}
	}
	if w := s.KernelWatermark; !saneTime(w.At, now) || w.Ties < 0 {
		errs = append(errs, fmt.Errorf("kernel watermark %s (%d ties)", w.At, w.Ties))
	}
	return errors.Join(errs...)
}

func (p *podState) check(uid string, now time.Time) error {
	switch {
	case p == nil:
		return errors.New("no record")
	case uid == "" || p.Pod.UID != uid:
		return fmt.Errorf("record of pod uid %q", p.Pod.UID)
	case !p.Accepts.valid(ringSize) || !p.Early.valid():
		return errors.New("a ring's index is out of range")
	}
	for _, t := range []time.Time{p.Seen, p.LastAccept, p.NotReadySince, p.Killing, p.PrestopFailed, p.LastEnd, p.OutsideKill} {
		if !saneTime(t, now) {
			return fmt.Errorf("time %s", t)
		}
	}
	if err := p.Startup.check(now); err != nil {
		return fmt.Errorf("startup: %w", err)
	}
	if p.Term == nil {
		return nil
	}
	if !saneTime(p.Term.Start, now) || p.Term.Unclassified < 0 {
		return fmt.Errorf("termination started %s, %d unclassified", p.Term.Start, p.Term.Unclassified)
	}
	return CheckTermination(p.Term.T, now)
}

// valid: Next indexes T once the ring is full, and T never outgrows it.
func (r timeRing) valid(size int) bool {
	return len(r.T) <= size && r.Next >= 0 && (r.Next == 0 || r.Next < len(r.T))
}

func (r eventRing) valid() bool {
	return len(r.E) <= earlySize && r.Next >= 0 && (r.Next == 0 || r.Next < len(r.E))
}

// CheckTermination reports whether a termination read back from disk is
// one the metrics, the API and the timeline can take: a pod UID, times
// between the Unix epoch and a day past now, counts not negative, lists
// bounded.
func CheckTermination(t Termination, now time.Time) error {
	if t.PodUID == "" {
		return errors.New("termination without a pod uid")
	}
	for _, m := range t.Marks.Observed() {
		if !saneTime(m.Time, now) {
			return fmt.Errorf("termination of pod uid %s: mark %s at %s", t.PodUID, m.Name, m.Time)
		}
	}
	if !saneTime(t.LastConnAttempt, now) || t.GracePeriod < 0 {
		return fmt.Errorf("termination of pod uid %s: last connection %s, grace period %s", t.PodUID, t.LastConnAttempt, t.GracePeriod)
	}
	if name, ok := negativeCount(t.Counts); ok {
		return fmt.Errorf("termination of pod uid %s: count %s is negative", t.PodUID, name)
	}
	if len(t.Connections) > maxRestoredConnPts || max(len(t.Sources), len(t.RoutingSources), len(t.Diagnoses),
		len(t.PartialReasons), len(t.Listeners), len(t.RefusedInsidePorts)) > maxRestoredRows {
		return fmt.Errorf("termination of pod uid %s: lists longer than drainwatch keeps", t.PodUID)
	}
	return nil
}

// negativeCount names the first negative field of c (every field is a
// count: reflection keeps a new one checked).
func negativeCount(c Counts) (string, bool) {
	v := reflect.ValueOf(c)
	for i := range v.NumField() {
		if f := v.Field(i); f.CanInt() && f.Int() < 0 {
			return v.Type().Field(i).Name, true
		}
	}
	return "", false
}
