package exporter

import (
	"bufio"
	"time"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
)

// routingSourceRow is one row of a termination's routing-source table, as
// the timeline text and the page print it.
type routingSourceRow struct {
	Source                          string
	Last, Lag                       string // Last relative to the timeline's origin; "-" when unknown
	Accepted, Refused, ResetOnReuse int
}

// routingSourceRows formats t's routing sources (slowest first) with their
// last send relative to origin.
func routingSourceRows(t correlate.Termination, origin time.Time) []routingSourceRow {
	rows := make([]routingSourceRow, 0, len(t.RoutingSources))
	for _, s := range t.RoutingSources {
		r := routingSourceRow{Source: s.Source, Last: "-", Lag: "-", Accepted: s.Accepted, Refused: s.Refused, ResetOnReuse: s.ResetOnReuse}
		if !s.Last.IsZero() {
			r.Last, r.Lag = correlate.FormatOffset(s.Last.Sub(origin)), correlate.FormatSecondsMs(s.Lag)
		}
		rows = append(rows, r)
	}
	return rows
}

// writeRoutingSources prints the routing-source table under the counts.
func writeRoutingSources(w *bufio.Writer, t correlate.Termination, origin time.Time) {
	rows := routingSourceRows(t, origin)
	if len(rows) == 0 {
		return
	}
	width := len("source")
	for i := range rows {
		// Escaped before the column is sized: printLine would widen it.
		rows[i].Source = collector.Printable(rows[i].Source)
		width = max(width, len(rows[i].Source))
	}
	printLine(w, "  sending after endpoints_not_ready (slowest first):")
	printLine(w, "    %-*s  %10s  %8s  %8s  %7s  %14s", width, "source", "last", "lag", "accepted", "refused", "reset on reuse")
	for _, r := range rows {
		printLine(w, "    %-*s  %10s  %8s  %8d  %7d  %14d", width, r.Source, r.Last, r.Lag, r.Accepted, r.Refused, r.ResetOnReuse)
	}
}
