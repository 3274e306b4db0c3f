package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

// completeTimeout bounds the wait for a termination to be complete: the
// pod's grace, the node agent's cleanup and the daemon's kernel tail (5 s).
const completeTimeout = 90 * time.Second

// Terminations returns every daemon's terminations of namespace ns, merged
// by start time, through the daemons' HTTP API (what `drainwatch timeline`
// reads).
func (l *Lab) Terminations(ctx context.Context, ns string) ([]exporter.TerminationView, error) {
	ds := make([]exporter.Daemon, len(l.Daemons))
	for i, d := range l.Daemons {
		ds[i] = d.API()
	}
	vs, errs := exporter.QueryDaemons(ctx, ds, exporter.Filter{Namespace: ns})
	return vs, errors.Join(errs...)
}

// WaitComplete waits until drainwatch reports a complete termination for
// every pod UID of uids and returns them in the order of uids.
func (l *Lab) WaitComplete(ctx context.Context, ns string, uids ...string) ([]exporter.TerminationView, error) {
	ctx, cancel := context.WithTimeout(ctx, completeTimeout)
	defer cancel()
	for {
		vs, err := l.Terminations(ctx, ns)
		if got, ok := completeOf(vs, uids); err == nil && ok {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("terminations of %d pods in %s not complete (last error %v): %w", len(uids), ns, err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// completeOf picks the terminations of uids, if all are complete.
func completeOf(vs []exporter.TerminationView, uids []string) ([]exporter.TerminationView, bool) {
	byUID := map[string]exporter.TerminationView{}
	for _, v := range vs {
		byUID[v.PodUID] = v
	}
	out := make([]exporter.TerminationView, 0, len(uids))
	for _, uid := range uids {
		v, ok := byUID[uid]
		if !ok || !v.Complete {
			return nil, false
		}
		out = append(out, v)
	}
	return out, true
}

// timelineText is the exporter's timeline text (`drainwatch timeline`).
func timelineText(vs []exporter.TerminationView) string {
	var b bytes.Buffer
	if err := exporter.WriteTimelines(&b, vs); err != nil {
		return "timeline: " + err.Error()
	}
	return b.String()
}

// diagnosisCodes returns the distinct diagnosis codes of vs, in order.
func diagnosisCodes(vs ...exporter.TerminationView) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, v := range vs {
		for _, d := range v.Diagnoses {
			if !seen[d.Code] {
				seen[d.Code] = true
				out = append(out, d.Code)
			}
		}
	}
	return out
}

// sumCounts adds the counts of terminations.
func sumCounts(vs ...exporter.TerminationView) correlate.Counts {
	var c correlate.Counts
	for _, v := range vs {
		c.RefusedAfterSigterm += v.Counts.RefusedAfterSigterm
		c.RefusedBeforeSigterm += v.Counts.RefusedBeforeSigterm
		c.RequestsKilledBySigkill += v.Counts.RequestsKilledBySigkill
		c.RequestsKilledAtExit += v.Counts.RequestsKilledAtExit
		c.ProbeRefused += v.Counts.ProbeRefused
		c.ConnectionsResetAtShutdown += v.Counts.ConnectionsResetAtShutdown
		c.ConnectionsBlackholed += v.Counts.ConnectionsBlackholed
	}
	return c
}

// daemonArgs are the CLI's flags that reach every daemon: --url each, and
// as the README says a user reaches daemons installed with the shipped
// values, their CA, the certificate's name, a token bound to the
// drainwatch audience.
func (l *Lab) daemonArgs() []string {
	var args []string
	for _, d := range l.Daemons {
		args = append(args, "--url="+d.URL)
	}
	if l.Shipped != nil {
		args = append(args, "--certificate-authority="+l.Shipped.CAFile, "--tls-server-name="+l.Shipped.ServerName,
			"--token="+l.readerToken)
	}
	return args
}

// timelineCLI runs `drainwatch timeline --url <each daemon> --namespace ns`,
// what a user runs; if the binary fails, the exporter's text of vs stands in
// with the error.
func (l *Lab) timelineCLI(ctx context.Context, ns string, vs []exporter.TerminationView) string {
	args := append([]string{"timeline", "--namespace=" + ns}, l.daemonArgs()...)
	out, err := exec.CommandContext(ctx, l.cfg.Drainwatch, args...).Output()
	if err != nil {
		return fmt.Sprintf("(drainwatch timeline failed: %v; the exporter's text instead)\n%s", err, timelineText(vs))
	}
	return string(out)
}
