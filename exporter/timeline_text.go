package exporter

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
)

// WriteTimelines prints terminations like the seeds' experiment: a header,
// one line per mark with its time relative to the stop signal, the counts,
// the derived durations, then each diagnosis with its fix. Every line is
// written through collector.Printable: a string from the cluster cannot
// drive the terminal or forge a line.
func WriteTimelines(w io.Writer, vs []TerminationView) error {
	bw := bufio.NewWriter(w)
	for i, v := range vs {
		if i > 0 {
			bw.WriteString("\n")
		}
		writeTimeline(bw, v)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing timelines: %w", err)
	}
	return nil
}

func writeTimeline(w *bufio.Writer, v TerminationView) {
	t := v.Termination
	wl := t.Workload
	printLine(w, "%s/%s  %s %s revision %s  node %s  outcome %s", wl.Namespace, t.Pod,
		orNone(wl.Kind), orNone(wl.Name), orNone(wl.Revision), t.Node, orNone(t.Outcome))
	ips := t.PodIP.String()
	if len(t.PodIPs) > 1 { // dual-stack
		parts := make([]string, len(t.PodIPs))
		for i, ip := range t.PodIPs {
			parts[i] = ip.String()
		}
		ips = strings.Join(parts, ", ")
	}
	printLine(w, "  uid %s  ip %s  grace period %s%s", t.PodUID, ips, correlate.FormatSecondsMs(t.GracePeriod), partialNote(t))
	if t.Cause != "" {
		evidence := ""
		if t.CauseEvidence != "" {
			evidence = " (" + t.CauseEvidence + ")"
		}
		printLine(w, "  cause %s%s", t.Cause, evidence)
	}
	origin := t.Marks.StopSignal
	if origin.IsZero() {
		origin = t.Marks.First()
	}
	for _, m := range t.Marks.Observed() {
		printMark(w, m, origin, markDetail(t, m.Name))
	}
	if l := listenersLine(t, origin); l != "" {
		printLine(w, "  %s", l)
	}
	writeCounts(w, t)
	if s := SourcesLine(t.Sources); s != "" {
		printLine(w, "  sources: %s", s)
	}
	writeRoutingSources(w, t, origin)
	if c := connectionsLine(t, origin); c != "" {
		printLine(w, "  %s", c)
	}
	if d := durationLine(t); d != "" {
		printLine(w, "  %s", d)
	}
	writeDiagnoses(w, t.Diagnoses)
}

// printMark writes a mark's line: its time relative to the timeline's
// origin, its name and what it alone does not say.
func printMark(w *bufio.Writer, m correlate.Mark, origin time.Time, detail string) {
	line := fmt.Sprintf("  %10s  %-20s %s", correlate.FormatOffset(m.Time.Sub(origin)), m.Name, detail)
	printLine(w, "%s", strings.TrimRight(line, " "))
}

// writeDiagnoses writes each diagnosis with its fix.
func writeDiagnoses(w *bufio.Writer, ds []correlate.Diagnosis) {
	for _, d := range ds {
		printLine(w, "  diagnosis %s: %s", d.Code, d.Message)
		if d.Fix != "" {
			printLine(w, "    fix: %s", d.Fix)
		}
	}
}

// printLine writes one line of a timeline, the cluster's strings in it
// escaped (collector.Printable): only the layout ends a line.
func printLine(w *bufio.Writer, format string, args ...any) {
	w.WriteString(collector.Printable(fmt.Sprintf(format, args...)))
	w.WriteByte('\n')
}

// markDetail adds what a mark alone does not say.
func markDetail(t correlate.Termination, mark string) string {
	switch mark {
	case "stop_signal":
		target := t.StopSignalTarget
		if target == "" {
			target = "the container's init"
		}
		detail := fmt.Sprintf("%s to %s (PID 1)", collector.SignalName(t.StopSignal), target)
		if t.StopSignalAPI != 0 && t.StopSignalAPI != t.StopSignal {
			detail += fmt.Sprintf("; the API names %s", collector.SignalName(t.StopSignalAPI))
		}
		return detail
	case "listener_closed":
		if l, ok := t.ServingListener(); ok && l.Container != "" {
			return fmt.Sprintf("container %s, port %d", l.Container, l.Port)
		}
		return ""
	case "sigkill":
		return "SIGKILL"
	case "exit":
		detail := fmt.Sprintf("exit code %d", t.ExitCode)
		if t.ExitSignal != 0 {
			detail += ", killed by " + collector.SignalName(t.ExitSignal)
		}
		if correlate.DeathNotable(t) {
			detail += "; " + correlate.DeathText(t)
		}
		return detail
	}
	return ""
}

// listenersLine lists the listener closes of a pod of several containers,
// whose container each was: "listeners closed: proxy :15006 +0.001s, app
// :8080 +2.503s (inside the pod: only its containers reached it)".
func listenersLine(t correlate.Termination, origin time.Time) string {
	if len(t.Listeners) == 0 {
		return ""
	}
	parts := make([]string, len(t.Listeners))
	for i, l := range t.Listeners {
		parts[i] = fmt.Sprintf("%s :%d %s", orNone(l.Container), l.Port, correlate.FormatOffset(l.At.Sub(origin)))
		if l.Inner {
			parts[i] += " (inside the pod: only its containers reached it)"
		}
	}
	return "listeners closed: " + strings.Join(parts, ", ")
}

// connectionsLine summarises the connection attempts kept for the timeline
// (bounded: the counts above are exact, this is what the page plots),
// the kubelet's probes apart from client traffic.
func connectionsLine(t correlate.Termination, origin time.Time) string {
	if len(t.Connections) == 0 {
		return ""
	}
	var clients, probes [2]int // accepted, refused
	first, last := t.Connections[0].Time, t.Connections[0].Time
	for _, c := range t.Connections {
		n := &clients
		if c.Probe {
			n = &probes
		}
		if c.Refused {
			n[1]++
		} else {
			n[0]++
		}
		first, last = minTime(first, c.Time), maxTime(last, c.Time)
	}
	line := fmt.Sprintf("connection attempts plotted: %d accepted, %d refused", clients[0], clients[1])
	if probes != [2]int{} {
		line += fmt.Sprintf("; probes %d accepted, %d refused", probes[0], probes[1])
	}
	return fmt.Sprintf("%s, from %s to %s", line, correlate.FormatOffset(first.Sub(origin)), correlate.FormatOffset(last.Sub(origin)))
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// durationOrder is the order the derived durations are printed in.
var durationOrder = []string{correlate.DurRoutingLag, correlate.DurListenerCloseDelay, correlate.DurPrestop,
	correlate.DurDrain, correlate.DurGraceUsed}

func durationLine(t correlate.Termination) string {
	ds := t.Durations()
	var parts []string
	for _, name := range durationOrder {
		if d, ok := ds[name]; ok {
			parts = append(parts, fmt.Sprintf("%s %s", name, correlate.FormatSecondsMs(d)))
		}
	}
	return strings.Join(parts, "  ")
}

func partialNote(t correlate.Termination) string { return partialText(t.Partial, t.PartialReasons) }

// partialText is a partial record's note on its header: "  partial: " and
// its reasons.
func partialText(partial bool, reasons []string) string {
	if !partial {
		return ""
	}
	return "  partial: " + strings.Join(reasons, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
