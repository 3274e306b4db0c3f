package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drainwatch/drainwatch/advise"
	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

// rolloutFlags are `drainwatch rollout`'s flags: the daemon flags of
// timeline, the revision, the window and the output.
type rolloutFlags struct {
	timelineFlags
}

func rolloutFlagSet(f *rolloutFlags, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("drainwatch rollout", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: drainwatch rollout KIND/NAME -n NAMESPACE [flags]

One workload's rollout across the cluster: every termination of its old
pods and every startup of its new ones on every node, totals per revision,
the slowest routing source, the diagnoses by count and the advice. KIND is
deployment (deploy), statefulset (sts), daemonset (ds) or rollout (Argo).
The nodes whose daemons did not answer are named: their pods are missing.

Flags:
`)
		fs.PrintDefaults()
	}
	f.daemonFlags(fs)
	fs.StringVar(&f.namespace, "namespace", "", "the workload's namespace (-n; default: the kubeconfig context's)")
	fs.StringVar(&f.namespace, "n", "", "short for --namespace")
	fs.StringVar(&f.revision, "revision", "", "only this revision (the revision label of the metrics and of timeline)")
	fs.StringVar(&f.since, "since", "", "only records with a mark after this: a duration back from now (2h) or an RFC 3339 time")
	fs.StringVar(&f.format, "output", "text", "text, json, or html: one self-contained page to keep with an incident (-o)")
	fs.StringVar(&f.format, "o", "text", "short for --output")
	return fs
}

// rolloutKinds are the workload kinds a rollout names, by what kubectl
// accepts for them.
var rolloutKinds = map[string]string{
	"deployment": "Deployment", "deployments": "Deployment", "deploy": "Deployment",
	"statefulset": "StatefulSet", "statefulsets": "StatefulSet", "sts": "StatefulSet",
	"daemonset": "DaemonSet", "daemonsets": "DaemonSet", "ds": "DaemonSet",
	"rollout": "Rollout", "rollouts": "Rollout", "ro": "Rollout",
}

func parseRolloutFlags(args []string, stderr io.Writer) (rolloutFlags, string, error) {
	var f rolloutFlags
	fs := rolloutFlagSet(&f, stderr)
	// The workload may come first (kubectl's order) or last.
	var ref string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		ref, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return f, "", err
	}
	if ref == "" && fs.NArg() == 1 {
		ref = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return f, "", fmt.Errorf("drainwatch rollout takes one KIND/NAME, got %q", append([]string{ref}, fs.Args()...))
	}
	kind, name, ok := strings.Cut(ref, "/")
	if !ok || name == "" || rolloutKinds[strings.ToLower(kind)] == "" {
		return f, "", fmt.Errorf("drainwatch rollout KIND/NAME: got %q, want deployment/NAME, statefulset/NAME, daemonset/NAME or rollout/NAME", ref)
	}
	if f.format != "text" && f.format != "json" && f.format != "html" {
		return f, "", fmt.Errorf("--output=%q: want text, json or html", f.format)
	}
	if err := f.checkVia(); err != nil {
		return f, "", err
	}
	f.workload = name
	return f, rolloutKinds[strings.ToLower(kind)], f.checkURLs()
}

func rolloutCmd(args []string, stdout, stderr io.Writer) int {
	f, kind, err := parseRolloutFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "drainwatch rollout:", err)
		return 2
	}
	if f.namespace == "" && len(f.urls) == 0 {
		if ns, _, err := f.clientConfig().Namespace(); err == nil {
			f.namespace = ns
		}
	}
	if f.namespace == "" {
		fmt.Fprintln(stderr, "drainwatch rollout: -n NAMESPACE is required")
		return 2
	}
	filter, err := f.filter(time.Now())
	if err != nil {
		fmt.Fprintln(stderr, "drainwatch rollout:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	daemons, err := f.daemons(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "drainwatch rollout:", err)
		return 1
	}
	tl, errs := exporter.QueryTimeline(ctx, daemons, filter, true)
	for _, err := range errs {
		fmt.Fprintln(stderr, "drainwatch rollout:", collector.Printable(err.Error()))
	}
	if tl.Answered == 0 {
		return 1
	}
	r := newRolloutReport(f.namespace, kind, f.workload, tl, errs)
	switch f.format {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(r)
	case "html":
		err = r.writeHTML(stdout, time.Now())
	default:
		err = r.writeText(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "drainwatch rollout:", err)
		return 1
	}
	return 0
}

// rolloutReport is `drainwatch rollout`'s answer (-o json's document).
type rolloutReport struct {
	Namespace string `json:"namespace"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	// Revisions are the totals per revision, the oldest first.
	Revisions    []revisionTotals `json:"revisions"`
	Terminations int              `json:"terminations"`
	Startups     int              `json:"startups"`
	// Pods are the records one by one: each old pod's termination and each
	// new pod's startup, in the order they began.
	Pods []rolloutPod `json:"pods"`
	// Nodes hold the records.
	Nodes []string `json:"nodes"`
	// Slowest is the routing source that kept sending the longest after an
	// old pod's endpoint became not ready.
	Slowest   *slowestSource   `json:"slowest_source,omitempty"`
	Diagnoses []diagnosisCount `json:"diagnoses"`
	Advice    []advise.Advice  `json:"advice"`
	// Unanswered names the daemons that did not answer (through the
	// aggregated API its warnings name the nodes, on stderr).
	Unanswered []string `json:"unanswered,omitempty"`
	// terms are the workload's terminations, for -o html's timelines.
	terms []correlate.Termination
}

// revisionTotals sum one revision's terminations (its pods going: the
// old side) and startups (its pods coming: the new side).
type revisionTotals struct {
	Revision     string    `json:"revision"`
	First        time.Time `json:"first"`
	Terminations int       `json:"terminations"`
	Startups     int       `json:"startups"`
	Partial      int       `json:"partial"`
	// The old side's losses.
	RefusedAfterSigterm     int `json:"refused_after_sigterm"`
	RefusedBeforeSigterm    int `json:"refused_before_sigterm"`
	RequestsKilledBySigkill int `json:"requests_killed_by_sigkill"`
	RequestsKilledAtExit    int `json:"requests_killed_at_exit"`
	ConnectionsBlackholed   int `json:"connections_blackholed"`
	ResetAtShutdown         int `json:"connections_reset_at_shutdown"`
	ResetOnReuse            int `json:"requests_reset_on_reused_connections"`
	// The new side's.
	RefusedBeforeReady int `json:"refused_before_ready"`
	RefusedAfterReady  int `json:"refused_after_ready"`
	ResetAfterReady    int `json:"reset_after_ready"`
}

// rolloutPod is one record of the rollout: a pod that went (its
// termination) or came (its startup).
type rolloutPod struct {
	Pod      string    `json:"pod"`
	UID      string    `json:"pod_uid"`
	Node     string    `json:"node"`
	Revision string    `json:"revision"`
	Side     string    `json:"side"` // "gone" or "came"
	At       time.Time `json:"at"`   // the deletion (gone) or the creation (came)
	// Outcome is a termination's terminations_total label; a startup's is
	// "clean" or "lost".
	Outcome string `json:"outcome"`
	// Lost says what the pod lost, "" when nothing.
	Lost      string   `json:"lost,omitempty"`
	Partial   bool     `json:"partial,omitempty"`
	Diagnoses []string `json:"diagnoses,omitempty"`
}

type slowestSource struct {
	Source     string  `json:"source"`
	Kind       string  `json:"kind"`
	Pod        string  `json:"pod"`
	Node       string  `json:"node"`
	LagSeconds float64 `json:"lag_seconds"`
}

type diagnosisCount struct {
	Code  string `json:"code"`
	Count int    `json:"count"`
	Fix   string `json:"fix,omitempty"`
}

// newRolloutReport sums the records of kind/name (the daemons filter by
// name only).
func newRolloutReport(ns, kind, name string, tl exporter.Timeline, errs []error) rolloutReport {
	r := rolloutReport{Namespace: ns, Kind: kind, Name: name, Revisions: []revisionTotals{},
		Diagnoses: []diagnosisCount{}, Advice: []advise.Advice{}, Nodes: []string{}, Pods: []rolloutPod{}}
	byRev := map[string]*revisionTotals{}
	rev := func(w collector.Workload, at time.Time) *revisionTotals {
		t := byRev[w.Revision]
		if t == nil {
			t = &revisionTotals{Revision: w.Revision, First: at}
			byRev[w.Revision] = t
		}
		if !at.IsZero() && (t.First.IsZero() || at.Before(t.First)) {
			t.First = at
		}
		return t
	}
	ours := func(w collector.Workload) bool { return w.Kind == kind && w.Name == name && w.Namespace == ns }
	nodes := map[string]bool{}
	diags := map[string]*diagnosisCount{}
	var terms []correlate.Termination
	for _, v := range tl.Terminations {
		t := v.Termination
		if !ours(t.Workload) {
			continue
		}
		terms = append(terms, t)
		r.Terminations++
		nodes[t.Node] = true
		r.Pods = append(r.Pods, rolloutPod{Pod: t.Pod, UID: t.PodUID, Node: t.Node, Revision: t.Workload.Revision, Side: "gone",
			At: t.Start(), Outcome: cmp.Or(t.Outcome, "-"), Lost: terminationLost(t.Counts), Partial: t.Partial, Diagnoses: diagnosisList(t.Diagnoses)})
		tot := rev(t.Workload, t.Start())
		tot.Terminations++
		if t.Partial {
			tot.Partial++
		}
		c := t.Counts
		tot.RefusedAfterSigterm += c.RefusedAfterSigterm
		tot.RefusedBeforeSigterm += c.RefusedBeforeSigterm
		tot.RequestsKilledBySigkill += c.RequestsKilledBySigkill
		tot.RequestsKilledAtExit += c.RequestsKilledAtExit
		tot.ConnectionsBlackholed += c.ConnectionsBlackholed
		tot.ResetAtShutdown += c.ConnectionsResetAtShutdown
		tot.ResetOnReuse += c.RequestsResetOnReusedConnections
		for _, d := range t.Diagnoses {
			dc := diags[d.Code]
			if dc == nil {
				dc = &diagnosisCount{Code: d.Code, Fix: d.Fix}
				diags[d.Code] = dc
			}
			dc.Count++
		}
		if s, ok := t.SlowestSource(); ok && (r.Slowest == nil || s.Lag.Seconds() > r.Slowest.LagSeconds) {
			r.Slowest = &slowestSource{Source: s.Source, Kind: s.Kind, Pod: t.Pod, Node: t.Node, LagSeconds: s.Lag.Seconds()}
		}
	}
	for _, v := range tl.Startups {
		s := v.Startup
		if !ours(s.Workload) {
			continue
		}
		r.Startups++
		node := cmp.Or(s.Node, v.Daemon)
		if node != "" {
			nodes[node] = true
		}
		p := rolloutPod{Pod: s.Pod, UID: s.PodUID, Node: node, Revision: s.Workload.Revision, Side: "came",
			At: s.Marks.Created, Outcome: "clean", Lost: startupLost(s.Counts), Partial: s.Partial, Diagnoses: diagnosisList(s.Diagnoses)}
		if p.Lost != "" {
			p.Outcome = "lost"
		}
		r.Pods = append(r.Pods, p)
		tot := rev(s.Workload, s.Marks.Created)
		tot.Startups++
		if s.Partial {
			tot.Partial++
		}
		tot.RefusedBeforeReady += s.Counts.RefusedBeforeReady
		tot.RefusedAfterReady += s.Counts.RefusedAfterReady
		tot.ResetAfterReady += s.Counts.ResetAfterReady
	}
	for _, t := range byRev {
		r.Revisions = append(r.Revisions, *t)
	}
	slices.SortFunc(r.Revisions, func(a, b revisionTotals) int {
		return cmp.Or(a.First.Compare(b.First), cmp.Compare(a.Revision, b.Revision))
	})
	slices.SortStableFunc(r.Pods, func(a, b rolloutPod) int { return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Pod, b.Pod)) })
	for n := range nodes {
		r.Nodes = append(r.Nodes, n)
	}
	slices.Sort(r.Nodes)
	for _, d := range diags {
		r.Diagnoses = append(r.Diagnoses, *d)
	}
	slices.SortFunc(r.Diagnoses, func(a, b diagnosisCount) int { return cmp.Or(b.Count-a.Count, cmp.Compare(a.Code, b.Code)) })
	if len(terms) > 0 {
		r.Advice = advise.Advise(terms, advise.DefaultRule)
	}
	r.terms = terms
	for _, err := range errs {
		var de *exporter.DaemonError
		if errors.As(err, &de) {
			r.Unanswered = append(r.Unanswered, de.Daemon)
		}
	}
	return r
}

// terminationLost is what an old pod lost, in words ("3 refused, 2
// killed by SIGKILL"), "" when nothing.
func terminationLost(c correlate.Counts) string {
	return lostWords([]int{c.RefusedAfterSigterm + c.RefusedBeforeSigterm, c.RefusedInsidePod, c.RequestsKilledBySigkill, c.RequestsKilledAtExit,
		c.ConnectionsBlackholed, c.ConnectionsResetAtShutdown, c.RequestsResetOnReusedConnections, c.ConnectionsResetAtExit},
		[]string{"refused", "refused inside the pod", "killed by SIGKILL", "killed at exit", "blackholed", "reset at shutdown", "reset on reuse", "reset at exit"})
}

// startupLost is what a new pod lost, "" when nothing.
func startupLost(c correlate.StartupCounts) string {
	return lostWords([]int{c.RefusedBeforeReady, c.RefusedAfterReady, c.ResetAfterReady},
		[]string{"refused before Ready", "refused after Ready", "reset after Ready"})
}

func lostWords(ns []int, words []string) string {
	var out []string
	for i, n := range ns {
		if n > 0 {
			out = append(out, fmt.Sprintf("%d %s", n, words[i]))
		}
	}
	return strings.Join(out, ", ")
}

func diagnosisList(ds []correlate.Diagnosis) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Code)
	}
	return out
}

// writeText is the report for a terminal.
func (r rolloutReport) writeText(w io.Writer) error {
	fmt.Fprintf(w, "%s/%s in %s: %d terminations and %d startups on %d nodes, %d revisions\n",
		strings.ToLower(r.Kind), r.Name, r.Namespace, r.Terminations, r.Startups, len(r.Nodes), len(r.Revisions))
	if len(r.Unanswered) > 0 {
		fmt.Fprintf(w, "NOT ANSWERED (their pods are missing): %s\n", strings.Join(r.Unanswered, ", "))
	}
	if len(r.Revisions) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REVISION\tFIRST\tGONE\tREFUSED\tKILLED\tKILLED-AT-EXIT\tBLACKHOLED\tRESET\tRESET-ON-REUSE\tCAME\tREFUSED-BEFORE-READY\tREFUSED-AFTER-READY\tRESET-AFTER-READY\tPARTIAL")
		for _, t := range r.Revisions {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", cmp.Or(t.Revision, "-"),
				t.First.UTC().Format(time.RFC3339), t.Terminations, t.RefusedAfterSigterm+t.RefusedBeforeSigterm,
				t.RequestsKilledBySigkill, t.RequestsKilledAtExit, t.ConnectionsBlackholed, t.ResetAtShutdown, t.ResetOnReuse,
				t.Startups, t.RefusedBeforeReady, t.RefusedAfterReady, t.ResetAfterReady, t.Partial)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w, "(GONE: the revision's pods that terminated, and what they lost; CAME: its pods that started, and what they refused or reset)")
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "POD\tREVISION\tSIDE\tNODE\tAT\tOUTCOME\tLOST\tDIAGNOSES")
		for _, p := range r.Pods {
			outcome := p.Outcome
			if p.Partial && outcome != correlate.OutcomePartial {
				outcome += " (partial)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Pod, cmp.Or(p.Revision, "-"), p.Side, cmp.Or(p.Node, "-"),
				p.At.UTC().Format(time.RFC3339), outcome, cmp.Or(p.Lost, "-"), cmp.Or(strings.Join(p.Diagnoses, ","), "-"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if s := r.Slowest; s != nil {
		fmt.Fprintf(w, "\nSlowest routing source: %s (%s), still sending %s after pod %s's endpoint became not ready (node %s)\n",
			s.Source, s.Kind, correlate.FormatSeconds(time.Duration(s.LagSeconds*float64(time.Second))), s.Pod, s.Node)
	}
	if len(r.Diagnoses) > 0 {
		fmt.Fprintln(w, "\nDiagnoses:")
		for _, d := range r.Diagnoses {
			fmt.Fprintf(w, "  %d× %s", d.Count, d.Code)
			if d.Fix != "" {
				fmt.Fprintf(w, ": %s", d.Fix)
			}
			fmt.Fprintln(w)
		}
	}
	if len(r.Advice) > 0 {
		fmt.Fprintln(w, "\nAdvice:")
		return advise.WriteText(w, r.Advice)
	}
	return nil
}
