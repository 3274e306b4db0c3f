package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/exporter"
)

// timelineFlags are `drainwatch timeline`'s: where the daemons are, which
// terminations and startups of new pods to show, and how.
type timelineFlags struct {
	urls                            urlList
	kubeconfig, context             string
	dwNamespace, selector           string
	port                            int
	namespace, workload, pod, since string
	revision                        string
	format                          string
	timeout                         time.Duration
	follow, startups                bool
	interval                        time.Duration
	token, caFile, serverName       string
	insecure                        bool
	via                             string
}

// urlList is a repeatable (or comma-separated) --url.
type urlList []string

func (u *urlList) String() string { return strings.Join(*u, ",") }
func (u *urlList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*u = append(*u, s)
		}
	}
	return nil
}

// daemonFlags declares the flags that say where the daemons are and how
// to reach them, shared by timeline and advise.
func (f *timelineFlags) daemonFlags(fs *flag.FlagSet) {
	fs.Var(&f.urls, "url", "a daemon's address (https://NODE:9090, or http:// for one without TLS), repeatable; without it every daemon is asked through the API server's pod proxy, which carries no credential to them; no redirect is followed")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&f.context, "context", "", "kubeconfig context (default: the current one)")
	fs.StringVar(&f.dwNamespace, "drainwatch-namespace", "drainwatch", "namespace of the drainwatch DaemonSet")
	fs.StringVar(&f.selector, "selector", "app.kubernetes.io/name=drainwatch", "label selector of the drainwatch pods")
	fs.IntVar(&f.port, "port", 9090, "the daemons' HTTP port")
	fs.StringVar(&f.token, "token", "", "bearer token for --url daemons run with --auth=kubernetes (default: the kubeconfig's credentials); "+
		"sent only to an https daemon whose certificate is verified: refused with an http:// --url or --insecure-skip-tls-verify")
	fs.StringVar(&f.caFile, "certificate-authority", "", "CA certificate (PEM) that signed the --url daemons' serving certificate (default: the system's roots)")
	fs.StringVar(&f.caFile, "ca-file", "", "same as --certificate-authority")
	fs.StringVar(&f.serverName, "tls-server-name", "", "the name the --url daemons' certificate is checked for, when the URL's host is not in it: "+
		"the chart's certificate names the metrics Service, drainwatch-metrics.drainwatch.svc (default: the URL's host)")
	fs.BoolVar(&f.insecure, "insecure-skip-tls-verify", false, "do not verify the --url daemons' certificate; then no credential is sent, "+
		"since the peer could be anyone and a token works against the API server too (a daemon run with --auth=kubernetes answers 401): "+
		"pass --certificate-authority instead")
	fs.StringVar(&f.via, "via", viaAuto, "without --url, how the daemons are asked: "+
		"api (the aggregated API drainwatch.io/v1alpha1 that drainwatch-apiserver serves: RBAC on terminations in the namespace, the daemons over TLS), "+
		"pods (the API server's pod proxy to each daemon, which carries no credential: daemons with --auth=none), "+
		"or auto (api when the API server serves it, else pods)")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "give up on the daemons after this long")
}

// checkVia checks --via.
func (f timelineFlags) checkVia() error {
	switch f.via {
	case viaAuto, viaAPI, viaPods:
		return nil
	}
	return fmt.Errorf("--via=%q: want auto, api or pods", f.via)
}

// timelineFlagSet builds `drainwatch timeline`'s flags into f without parsing
// them (commands.go lists it for the CLI reference).
func timelineFlagSet(f *timelineFlags, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("drainwatch timeline", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f.daemonFlags(fs)
	fs.StringVar(&f.namespace, "namespace", "", "only terminations and startups of pods in this namespace (-n)")
	fs.StringVar(&f.namespace, "n", "", "short for --namespace")
	fs.StringVar(&f.revision, "revision", "", "only terminations and startups of this revision of the workload (the revision label of the metrics)")
	fs.StringVar(&f.workload, "workload", "", "only terminations and startups of this workload (Deployment, StatefulSet... name)")
	fs.StringVar(&f.pod, "pod", "", "only the termination and startup of this pod")
	fs.StringVar(&f.since, "since", "", "only terminations with a mark after this, and startups whose window ended after it or is open: "+
		"a duration back from now (15m) or an RFC 3339 time")
	fs.BoolVar(&f.startups, "startups", true, "also list the startups of the new pods the filters select, after the terminations: "+
		"both ends of a rollout (--startups=false: terminations only; --follow follows terminations only)")
	fs.StringVar(&f.format, "output", "text", "text (a timeline per termination, then a block per new pod's startup), "+
		"wide (a line per termination, then a line per startup), json or yaml (-o): an object with terminations and startups")
	fs.StringVar(&f.format, "o", "text", "short for --output")
	fs.StringVar(&f.format, "format", "text", "same as --output")
	fs.BoolVar(&f.follow, "follow", false, "keep asking the daemons every --interval and print terminations that are new or changed, until interrupted (-f)")
	fs.BoolVar(&f.follow, "f", false, "short for --follow")
	fs.DurationVar(&f.interval, "interval", 5*time.Second, "with --follow, the time between two queries")
	return fs
}

func parseTimelineFlags(args []string, stderr io.Writer) (timelineFlags, error) {
	var f timelineFlags
	fs := timelineFlagSet(&f, stderr)
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("drainwatch timeline takes no arguments, got %q", fs.Args())
	}
	if err := checkOutput(f.format); err != nil {
		return f, err
	}
	if err := f.checkVia(); err != nil {
		return f, err
	}
	return f, f.checkURLs()
}

// checkURLs checks each --url, and that no credential would go to one
// unprotected: a mistake in the flags, reported before any connection.
func (f timelineFlags) checkURLs() error {
	for _, raw := range f.urls {
		u, err := daemonURL(raw)
		if err != nil {
			return err
		}
		if err := f.checkDaemonTrust(u); err != nil {
			return err
		}
	}
	return nil
}

// filter turns the flags into the API's filter.
func (f timelineFlags) filter(now time.Time) (exporter.Filter, error) {
	q := exporter.Filter{Namespace: f.namespace, Workload: f.workload, Pod: f.pod, Revision: f.revision}.Query()
	if f.since != "" {
		q.Set("since", f.since)
	}
	return exporter.ParseFilter(q, now)
}

// timelineCmd is `drainwatch timeline`: it asks one or every daemon for the
// terminations matching the filters, and the startups of new pods unless
// --startups=false, and prints them. It returns the exit code: 1 when no
// daemon answered.
func timelineCmd(args []string, stdout, stderr io.Writer) int {
	f, err := parseTimelineFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "drainwatch timeline:", err)
		return 2
	}
	filter, err := f.filter(time.Now())
	if err != nil {
		fmt.Fprintln(stderr, "drainwatch timeline:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	daemons, err := f.daemons(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "drainwatch timeline:", err)
		return 1
	}
	if f.follow {
		return f.followCmd(daemons, filter, stdout, stderr)
	}
	tl, errs := exporter.QueryTimeline(ctx, daemons, filter, f.startups)
	printDaemonErrors(stderr, errs)
	printStartupNotes(stderr, tl)
	if tl.Answered == 0 {
		return 1
	}
	if err := printTimelines(stdout, f.format, tl); err != nil {
		fmt.Fprintln(stderr, "drainwatch timeline:", err)
		return 1
	}
	return 0
}

// printDaemonErrors reports the daemons that did not answer; an error can
// quote a daemon's response body, so it is escaped like the output.
func printDaemonErrors(stderr io.Writer, errs []error) {
	for _, err := range errs {
		fmt.Fprintln(stderr, "drainwatch timeline:", collector.Printable(err.Error()))
	}
}

// daemons are the --url daemons, else the aggregated API (--via), else
// the pods of the DaemonSet.
func (f timelineFlags) daemons(ctx context.Context) ([]exporter.Daemon, error) {
	if len(f.urls) > 0 {
		ds := make([]exporter.Daemon, len(f.urls))
		for i, u := range f.urls {
			client, err := f.urlClient(u)
			if err != nil {
				return nil, err
			}
			ds[i] = audienceHint{exporter.URLDaemon(u, client)}
		}
		return ds, nil
	}
	if f.via != viaPods {
		ds, err := f.apiDaemons()
		if err != nil || ds != nil {
			return ds, err
		}
	}
	client, err := f.kubeClient()
	if err != nil {
		return nil, err
	}
	ds, err := exporter.ProxyDaemons(ctx, client, f.dwNamespace, f.selector, f.port)
	for i := range ds {
		ds[i] = proxiedDaemon{ds[i]}
	}
	return ds, err
}

// printTimelines writes the terminations, then the startups when they
// were asked: json and yaml as one object, wide as two tables, text as
// timelines and a section of startups.
func printTimelines(w io.Writer, format string, tl exporter.Timeline) error {
	if tl.Terminations == nil {
		tl.Terminations = []exporter.TerminationView{}
	}
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(tl)
	case "yaml":
		return printYAML(w, tl)
	case "wide":
		if err := writeWide(w, tl.Terminations, true); err != nil || tl.Startups == nil {
			return err
		}
		return writeStartupsWide(w, tl.Startups)
	}
	if err := printTerminationsText(w, tl.Terminations); err != nil || tl.Startups == nil {
		return err
	}
	return printStartupsText(w, tl.Startups)
}

func printTerminationsText(w io.Writer, views []exporter.TerminationView) error {
	if len(views) == 0 {
		_, err := fmt.Fprintln(w, "no termination matches")
		return err
	}
	return exporter.WriteTimelines(w, views)
}
