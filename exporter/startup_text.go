package exporter

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drainwatch/drainwatch/correlate"
)

// WriteStartups prints the startups of new pods like WriteTimelines prints
// terminations: a header, one line per mark relative to the pod's creation
// (its Ready when the creation is unknown), the counts, ready_to_first_accept,
// then each diagnosis with its fix. Every line goes through
// collector.Printable, as a timeline's.
func WriteStartups(w io.Writer, vs []StartupView) error {
	bw := bufio.NewWriter(w)
	for i, v := range vs {
		if i > 0 {
			bw.WriteString("\n")
		}
		writeStartup(bw, v)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing startups: %w", err)
	}
	return nil
}

func writeStartup(w *bufio.Writer, v StartupView) {
	s, wl := v.Startup, v.Workload
	printLine(w, "%s/%s  %s %s revision %s  daemon %s  %s", wl.Namespace, s.Pod,
		orNone(wl.Kind), orNone(wl.Name), orNone(wl.Revision), v.Daemon, startupState(s))
	printLine(w, "  uid %s  window %s%s", s.PodUID, correlate.FormatSecondsMs(s.Window), partialText(s.Partial, s.PartialReasons))
	origin := startupOrigin(s)
	for _, m := range startupMarks(s.Marks) {
		printMark(w, m, origin, startupMarkDetail(s, m.Name))
	}
	c := s.Counts
	printLine(w, "  refused before ready: %d  refused after ready: %d  reset after ready: %d  probe refusals: %d",
		c.RefusedBeforeReady, c.RefusedAfterReady, c.ResetAfterReady, c.ProbeRefused)
	if !s.Marks.Ready.IsZero() && !s.Marks.FirstAccept.IsZero() {
		printLine(w, "  ready_to_first_accept %s", correlate.FormatSecondsMs(s.ReadyToFirstAccept))
	}
	if len(s.RefusedPorts) > 0 {
		printLine(w, "  refused after ready on ports: %s", joinPorts(s.RefusedPorts))
	}
	writeDiagnoses(w, s.Diagnoses)
}

func startupState(s correlate.Startup) string {
	if s.Complete {
		return "complete"
	}
	return "in progress"
}

// startupMarks are a startup's observed marks, named as the API names
// them, in time order (ties keep the record's order, docs/design.md's).
func startupMarks(m correlate.StartupMarks) []correlate.Mark {
	all := []correlate.Mark{{Name: "created", Time: m.Created}, {Name: "container_started", Time: m.ContainerStarted},
		{Name: "first_listener", Time: m.FirstListener}, {Name: "ready", Time: m.Ready},
		{Name: "first_accept", Time: m.FirstAccept}, {Name: "window_end", Time: m.WindowEnd}}
	out := slices.DeleteFunc(all, func(m correlate.Mark) bool { return m.Time.IsZero() })
	slices.SortStableFunc(out, func(a, b correlate.Mark) int { return a.Time.Compare(b.Time) })
	return out
}

// startupOrigin is the time a startup's marks are relative to: the pod's
// creation, else Ready, else its first mark.
func startupOrigin(s correlate.Startup) time.Time {
	m := s.Marks
	switch {
	case !m.Created.IsZero():
		return m.Created
	case !m.Ready.IsZero():
		return m.Ready
	}
	if ms := startupMarks(m); len(ms) > 0 {
		return ms[0].Time
	}
	return time.Time{}
}

// startupMarkDetail adds what a mark alone does not say: the port that
// listened first, what ended the window.
func startupMarkDetail(s correlate.Startup, mark string) string {
	m := s.Marks
	switch mark {
	case "first_listener":
		for _, l := range s.Listeners {
			if l.At.Equal(m.FirstListener) {
				return "port " + strconv.Itoa(int(l.Port))
			}
		}
	case "window_end":
		// The window ends at Ready + the window, or at the deletion when it
		// came first (docs/design.md).
		switch {
		case m.Ready.IsZero():
			return "the deletion, before Ready"
		case m.WindowEnd.Equal(m.Ready.Add(s.Window)):
			return "ready + " + correlate.FormatSeconds(s.Window)
		}
		return "the deletion, before ready + " + correlate.FormatSeconds(s.Window)
	}
	return ""
}

func joinPorts(ports []uint16) string {
	parts := make([]string, len(ports))
	for i, p := range ports {
		parts[i] = strconv.Itoa(int(p))
	}
	return strings.Join(parts, ", ")
}
