package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/drainwatch/drainwatch/advise"
	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

const adviseUsage = `Usage: drainwatch advise [KIND/NAME] [-n NAMESPACE | -A] [-o text|yaml|json|patch] [flags]

Reads the terminations the daemons hold (through the API server's pod proxy,
or --url daemons directly; or, with --prometheus URL, the shipped histograms
over --since) and, per workload, turns the measured routing lag
and drain into a preStop sleep and a terminationGracePeriodSeconds:

  preStop sleep = ceil(p<percentile> routing lag + margin) seconds
  grace period  = preStop sleep + ceil(p<percentile> drain + margin) seconds

and, when a pool in front reused connections the server had closed idle,
the server's keep-alive idle timeout (its own setting, not in the patch):

  server idle timeout = ceil(longest pool idle + margin) seconds

from at least --min-terminations complete, non-partial terminations; with
fewer it says so and advises nothing (docs/advise.md). KIND/NAME is
deploy/web, sts/web, ds/web or rollout/web (an Argo Rollout). -o patch
prints the patch kubectl applies unchanged: a strategic merge, or for a
Rollout a JSON patch (a Rollout with spec.workloadRef: a strategic merge
of the Deployment it names, which stderr names):

  kubectl patch -n shop deploy/web -p "$(drainwatch advise -n shop deploy/web -o patch)"
  kubectl patch -n shop rollout/web --type json -p "$(drainwatch advise -n shop rollout/web -o patch)"

--emit-policy writes a ValidatingAdmissionPolicy (Warn, Audit), its binding
and a ConfigMap of measured minimums per namespace, for kubectl apply -f -.

Flags:
`

// adviseFlags are `drainwatch advise`'s: the daemons (shared with
// timeline), the workloads, the rule and the output.
type adviseFlags struct {
	timelineFlags
	allNamespaces bool
	kind          string
	rule          advise.Rule
	emitPolicy    bool
	prom          prometheusFlags
}

func parseAdviseFlags(args []string, stderr io.Writer) (adviseFlags, error) {
	f := adviseFlags{rule: advise.DefaultRule}
	fs := adviseFlagSet(&f, stderr)
	if err := parseInterspersed(fs, args); err != nil {
		return f, err
	}
	return f, f.check(fs.Args())
}

// adviseFlagSet builds `drainwatch advise`'s flags into f without parsing
// them (commands.go lists it for the CLI reference).
func adviseFlagSet(f *adviseFlags, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("drainwatch advise", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, adviseUsage); fs.PrintDefaults() }
	f.daemonFlags(fs)
	f.prom.register(fs)
	fs.StringVar(&f.namespace, "namespace", "", "the workloads of this namespace (-n; default: the kubeconfig's, else default)")
	fs.StringVar(&f.namespace, "n", "", "short for --namespace")
	fs.BoolVar(&f.allNamespaces, "all-namespaces", false, "every namespace (-A)")
	fs.BoolVar(&f.allNamespaces, "A", false, "short for --all-namespaces")
	fs.StringVar(&f.since, "since", "", "only terminations with a mark after this: a duration back from now (24h) or an RFC 3339 time")
	fs.StringVar(&f.format, "output", "text", "text, yaml, json or patch (a strategic-merge patch per workload, a JSON patch per Rollout; -o)")
	fs.StringVar(&f.format, "o", "text", "short for --output")
	fs.IntVar(&f.rule.MinTerminations, "min-terminations", advise.DefaultRule.MinTerminations, "advise nothing for a workload with fewer measured terminations")
	fs.Float64Var(&f.rule.Percentile, "percentile", advise.DefaultRule.Percentile, "the percentile (nearest rank) of routing lag and drain the values cover")
	fs.DurationVar(&f.rule.Margin, "margin", advise.DefaultRule.Margin, "added to the percentile of routing lag (preStop sleep) and of drain (grace period)")
	fs.BoolVar(&f.emitPolicy, "emit-policy", false, "write the admission policy, its binding and the measured minimums (YAML for kubectl apply -f -) instead of advice")
	return fs
}

// parseInterspersed parses flags before and after the KIND/NAME argument,
// as kubectl does.
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	return fs.Parse(pos)
}

// check validates the flags and the KIND/NAME argument.
func (f *adviseFlags) check(args []string) error {
	switch {
	case len(args) > 1:
		return fmt.Errorf("one workload at most (deploy/web), got %q", args)
	case f.format != "text" && f.format != "yaml" && f.format != "json" && f.format != "patch":
		return fmt.Errorf("-o %q: want text, yaml, json or patch", f.format)
	case f.allNamespaces && f.namespace != "":
		return errors.New("-A and -n contradict each other")
	}
	if len(args) == 1 {
		if f.allNamespaces {
			return fmt.Errorf("-A with %s: name the namespace with -n instead", args[0])
		}
		kind, name, err := parseWorkloadArg(args[0])
		if err != nil {
			return err
		}
		f.kind, f.workload = kind, name
	}
	if err := f.rule.Check(); err != nil {
		return err
	}
	if err := f.checkPrometheus(); err != nil || f.prom.url != "" {
		return err
	}
	return f.checkURLs()
}

// workloadKinds maps kubectl's names of a workload kind to the kind.
var workloadKinds = map[string]string{
	"deploy": "Deployment", "deployment": "Deployment", "deployments": "Deployment",
	"sts": "StatefulSet", "statefulset": "StatefulSet", "statefulsets": "StatefulSet",
	"ds": "DaemonSet", "daemonset": "DaemonSet", "daemonsets": "DaemonSet",
	"ro": "Rollout", "rollout": "Rollout", "rollouts": "Rollout",
}

func parseWorkloadArg(arg string) (kind, name string, err error) {
	k, n, ok := strings.Cut(arg, "/")
	kind = workloadKinds[strings.ToLower(k)]
	if !ok || n == "" || kind == "" {
		return "", "", fmt.Errorf("workload %q: want KIND/NAME with KIND deploy, sts, ds or rollout (deploy/web)", arg)
	}
	return kind, n, nil
}

// adviseCmd is `drainwatch advise`. It returns the exit code: 1 when no
// daemon answered or the API could not be read, 2 for a mistake in the
// flags.
func adviseCmd(args []string, stdout, stderr io.Writer) int {
	f, err := parseAdviseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "drainwatch advise:", err)
		return 2
	}
	if !f.allNamespaces && f.namespace == "" {
		f.namespace = f.defaultNamespace()
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	if f.prom.url != "" {
		return f.advisePrometheus(ctx, stdout, stderr)
	}
	terms, err := f.terminations(ctx, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "drainwatch advise:", err)
		return 1
	}
	if err := f.print(ctx, stdout, stderr, advise.Advise(terms, f.rule)); err != nil {
		fmt.Fprintln(stderr, "drainwatch advise:", err)
		return 1
	}
	return 0
}

// terminations are the daemons' terminations of the selected workloads.
func (f adviseFlags) terminations(ctx context.Context, stderr io.Writer) ([]correlate.Termination, error) {
	filter, err := f.filter(time.Now())
	if err != nil {
		return nil, err
	}
	daemons, err := f.daemons(ctx)
	if err != nil {
		return nil, err
	}
	views, errs := exporter.QueryDaemons(ctx, daemons, filter)
	for _, err := range errs {
		fmt.Fprintln(stderr, "drainwatch advise:", collector.Printable(err.Error()))
	}
	if len(errs) == len(daemons) {
		return nil, fmt.Errorf("no daemon answered (%d asked)", len(daemons))
	}
	var out []correlate.Termination
	for _, v := range views {
		if f.kind == "" || v.Workload.Kind == f.kind {
			out = append(out, v.Termination)
		}
	}
	return out, nil
}

// defaultNamespace is the kubeconfig context's namespace, else default.
func (f adviseFlags) defaultNamespace() string {
	if ns, _, err := f.clientConfig().Namespace(); err == nil && ns != "" {
		return ns
	}
	return "default"
}
