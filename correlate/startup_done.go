package correlate

import (
	"fmt"
	"sort"
	"time"
)

// TakeStartups returns the startups complete as of now, each once: those
// whose window ended startupSettle ago (late kernel events of its last
// moments are in), and those of pods whose state went away with their
// termination.
func (c *Correlator) TakeStartups(now time.Time) []Startup {
	out := c.startupsDone
	c.startupsDone = nil
	for _, p := range c.pods {
		st := p.Startup
		if st == nil || st.S.Marks.WindowEnd.IsZero() || now.Before(st.S.Marks.WindowEnd.Add(startupSettle)) {
			continue
		}
		out = append(out, c.finishStartup(p))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Marks.Created.Before(out[j].Marks.Created) })
	return out
}

// Startups returns the startups in progress, as they stand.
func (c *Correlator) Startups() []Startup {
	var out []Startup
	for _, p := range c.pods {
		if p.Startup != nil {
			out = append(out, c.evaluateStartup(p.Startup))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PodUID < out[j].PodUID })
	return out
}

// closeStartup ends a pod's startup when the pod's state goes away.
func (c *Correlator) closeStartup(p *podState) {
	if p.Startup != nil {
		c.startupsDone = append(c.startupsDone, c.finishStartup(p))
	}
}

func (c *Correlator) finishStartup(p *podState) Startup {
	st := p.Startup
	p.Startup = nil
	for _, ev := range st.Pending {
		st.classify(ev) // never Ready: every client event was before it
	}
	st.Pending = nil
	s := c.evaluateStartup(st)
	s.Complete = true
	if !s.NetnsBound {
		addStartupPartial(&s, StartupNetnsNotBound)
	}
	return s
}

// evaluateStartup returns the record with its derived values, partial
// reasons and diagnoses.
func (c *Correlator) evaluateStartup(st *startupState) Startup {
	s := st.S
	s.PartialReasons = append([]string(nil), s.PartialReasons...)
	m := s.Marks
	if !m.Ready.IsZero() && !m.FirstAccept.IsZero() {
		s.ReadyToFirstAccept = m.FirstAccept.Sub(m.Ready)
	}
	from := earliestSet(m.Created, m.ContainerStarted, m.Ready)
	for _, g := range c.gaps {
		if overlaps(g, from, m.WindowEnd) {
			addStartupPartial(&s, g.Reason)
		}
	}
	s.Diagnoses = nil
	for _, diagnose := range []func(Startup) *Diagnosis{readyBeforeListening, readyBeforeServing} {
		if d := diagnose(s); d != nil {
			s.Diagnoses = append(s.Diagnoses, *d)
		}
	}
	return s
}

// readyBeforeListening: clients were refused after Ready, so the readiness
// probe passed while what serves their port did not listen yet.
func readyBeforeListening(s Startup) *Diagnosis {
	n := s.Counts.RefusedAfterReady
	if n == 0 {
		return nil
	}
	msg := fmt.Sprintf("%d connection attempts refused after the pod was Ready", n)
	for _, l := range s.Listeners {
		if len(s.RefusedPorts) > 0 && l.Port == s.RefusedPorts[0] && l.At.After(s.Marks.Ready) {
			msg += fmt.Sprintf(": port %d listened %s after Ready", l.Port, FormatSeconds(l.At.Sub(s.Marks.Ready)))
		}
	}
	return &Diagnosis{Code: DiagReadyBeforeListening, Message: msg,
		Fix: "point the readiness probe at the port that serves the traffic, or add a startupProbe that passes only once it listens"}
}

// readyBeforeServing: the pod reset client connections it had accepted
// after Ready, so the readiness probe passed while what serves them was not
// ready yet (a warm-up, a dependency, an app behind a sidecar).
func readyBeforeServing(s Startup) *Diagnosis {
	n := s.Counts.ResetAfterReady
	if n == 0 {
		return nil
	}
	msg := fmt.Sprintf("%d client connections reset by the pod after it was Ready", n)
	if len(s.Resets) > 0 {
		r := s.Resets[0]
		msg += fmt.Sprintf(": the first on port %d, %s after Ready", r.Port, FormatSeconds(r.At.Sub(s.Marks.Ready)))
	}
	return &Diagnosis{Code: DiagReadyBeforeServing, Message: msg,
		Fix: "make the readiness probe pass only once the server serves its traffic (an httpGet on a path that needs what the traffic needs: warm caches, connected dependencies), or add a startupProbe that does"}
}

func earliestSet(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if !t.IsZero() && (out.IsZero() || t.Before(out)) {
			out = t
		}
	}
	return out
}

// CheckStartup reports whether a complete startup read back from disk is
// one the API can serve: the checks of one in progress.
func CheckStartup(s Startup, now time.Time) error {
	if s.PodUID == "" {
		return fmt.Errorf("no pod uid")
	}
	st := startupState{S: s}
	return st.check(now)
}

// check reports whether a startup read back from disk is one this
// correlator can run on: times sane, counts not negative, lists within
// their bounds.
func (st *startupState) check(now time.Time) error {
	if st == nil {
		return nil
	}
	s := &st.S
	m := s.Marks
	for _, t := range []time.Time{m.Created, m.ContainerStarted, m.FirstListener, m.Ready, m.FirstAccept, m.WindowEnd} {
		if !saneTime(t, now) {
			return fmt.Errorf("time %s", t)
		}
	}
	n := s.Counts
	switch {
	case n.RefusedBeforeReady < 0 || n.RefusedAfterReady < 0 || n.ResetAfterReady < 0 || n.ProbeRefused < 0:
		return fmt.Errorf("counts %+v", n)
	case len(st.Pending) > maxPending || len(s.Listeners) > maxStartupPorts || len(s.RefusedPorts) > maxStartupPorts || len(s.Resets) > maxStartupPorts ||
		len(st.Settled) > maxTrackedCookies || len(st.Remotes) > maxTrackedCookies ||
		len(st.Clients) > maxTrackedCookies || len(st.ClientRemotes) > maxTrackedCookies || len(s.PartialReasons) > maxRestoredRows:
		return fmt.Errorf("lists over their bounds")
	}
	return nil
}
