package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

// startupsHeading opens the text output's section of startups, after the
// terminations: the other end of the rollout.
const startupsHeading = "New pods (startups)"

func printStartupsText(w io.Writer, vs []exporter.StartupView) error {
	if _, err := fmt.Fprintf(w, "\n%s\n\n", startupsHeading); err != nil {
		return err
	}
	if len(vs) == 0 {
		_, err := fmt.Fprintln(w, "no startup matches")
		return err
	}
	return exporter.WriteStartups(w, vs)
}

// printStartupNotes says once which daemons listed no startups (too old to
// serve them) and which listed only their latest (more matched than a list
// holds): the output is short of them, the command does not fail.
func printStartupNotes(stderr io.Writer, tl exporter.Timeline) {
	if len(tl.NoStartups) > 0 {
		fmt.Fprintf(stderr, "drainwatch timeline: no startups from the daemons that do not serve /api/v1/startups "+
			"(older than this drainwatch: upgrade them to see their new pods): %s\n", printableList(tl.NoStartups))
	}
	if len(tl.TruncatedStartups) > 0 {
		fmt.Fprintf(stderr, "drainwatch timeline: more startups match than a daemon lists at once (%d): the latest %d of each are shown "+
			"from %s; narrow the query (-n, --workload, --revision, --since)\n", exporter.MaxPageSize, exporter.MaxPageSize, printableList(tl.TruncatedStartups))
	}
}

func printableList(names []string) string { return collector.Printable(strings.Join(names, ", ")) }

// wideStartupsHeader names writeStartupsWide's columns: a line per startup,
// its marks relative to its creation, what its clients met.
const wideStartupsHeader = "NAMESPACE\tPOD\tWORKLOAD\tREVISION\tDAEMON\tCREATED\tREADY\tREADY-TO-FIRST-ACCEPT\t" +
	"REFUSED-BEFORE-READY\tREFUSED-AFTER-READY\tRESET-AFTER-READY\tPROBE-REFUSED\tDIAGNOSES\tCOMPLETE"

// writeStartupsWide writes the startups' table under the terminations',
// a blank line apart.
func writeStartupsWide(w io.Writer, vs []exporter.StartupView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, wideStartupsHeader)
	for _, v := range vs {
		m, c, p := v.Marks, v.Counts, collector.Printable // the tabs and newline are the layout's alone
		fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n",
			p(v.Workload.Namespace), p(v.Pod), p(v.Workload.Kind), p(v.Workload.Name), p(orDash(v.Workload.Revision)), p(v.Daemon),
			wideTime(m.Created), wideOffset(m.Created, m.Ready), wideReadyToFirstAccept(v.Startup),
			c.RefusedBeforeReady, c.RefusedAfterReady, c.ResetAfterReady, c.ProbeRefused,
			p(orDash(diagnosisCodes(v.Diagnoses))), strconv.FormatBool(v.Complete))
	}
	return tw.Flush()
}

func wideTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// wideOffset is to relative to from ("+1.500s"), "-" when either is unknown.
func wideOffset(from, to time.Time) string {
	if from.IsZero() || to.IsZero() {
		return "-"
	}
	return correlate.FormatOffset(to.Sub(from))
}

func wideReadyToFirstAccept(s correlate.Startup) string {
	if s.Marks.Ready.IsZero() || s.Marks.FirstAccept.IsZero() {
		return "-"
	}
	return correlate.FormatSecondsMs(s.ReadyToFirstAccept)
}

func diagnosisCodes(ds []correlate.Diagnosis) string {
	codes := make([]string, len(ds))
	for i, d := range ds {
		codes[i] = d.Code
	}
	return strings.Join(codes, ",")
}
