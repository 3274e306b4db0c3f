package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/exporter"
)

// outputs are timeline's -o values, kubectl's names where they mean the same.
var outputs = []string{"text", "wide", "json", "yaml"}

func checkOutput(format string) error {
	for _, o := range outputs {
		if format == o {
			return nil
		}
	}
	return fmt.Errorf("-o %q: want text, wide, json or yaml", format)
}

// printYAML writes a document as YAML.
func printYAML(w io.Writer, doc any) error {
	data, err := yaml.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encoding YAML: %w", err)
	}
	_, err = w.Write(data)
	return err
}

// wideHeader names writeWide's columns: a line per termination, what it lost.
const wideHeader = "NAMESPACE\tPOD\tWORKLOAD\tREVISION\tNODE\tSTARTED\tOUTCOME\tREFUSED\tKILLED\tKILLED-AT-EXIT\tBLACKHOLED\tRESET\tCOMPLETE"

func writeWide(w io.Writer, views []exporter.TerminationView, header bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if header {
		fmt.Fprintln(tw, wideHeader)
	}
	for _, v := range views {
		started := "-"
		if t := v.Termination.Start(); !t.IsZero() {
			started = t.UTC().Format(time.RFC3339)
		}
		c, p := v.Counts, collector.Printable // the tabs and newline are the layout's alone
		fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n",
			p(v.Workload.Namespace), p(v.Pod), p(v.Workload.Kind), p(v.Workload.Name), p(orDash(v.Workload.Revision)), p(v.Node),
			started, p(orDash(v.Outcome)), c.RefusedAfterSigterm, c.RequestsKilledBySigkill, c.RequestsKilledAtExit,
			c.ConnectionsBlackholed, c.ConnectionsResetAtShutdown,
			strconv.FormatBool(v.Complete))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
