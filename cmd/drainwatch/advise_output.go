package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/drainwatch/drainwatch/advise"
	"github.com/drainwatch/drainwatch/collector"
)

// adviceList is the json and yaml output.
type adviceList struct {
	Advice []advise.Advice `json:"advice"`
}

// print writes the advice in the chosen form, or the admission policy.
func (f adviseFlags) print(ctx context.Context, stdout, stderr io.Writer, advices []advise.Advice) error {
	if len(advices) == 0 && !f.emitPolicy {
		fmt.Fprintln(stderr, "drainwatch advise: no termination of the selected workloads: nothing to advise")
	}
	switch {
	case f.emitPolicy:
		data, err := advise.WritePolicy(advices)
		if err == nil {
			_, err = stdout.Write(data)
		}
		return err
	case f.format == "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(adviceList{Advice: advices})
	case f.format == "yaml":
		data, err := yaml.Marshal(adviceList{Advice: advices})
		if err == nil {
			_, err = stdout.Write(data)
		}
		return err
	case f.format == "patch":
		return f.printPatches(ctx, stdout, stderr, advices)
	}
	return advise.WriteText(stdout, advices)
}

// printPatches writes a strategic-merge patch per workload: alone (JSON
// for kubectl patch -p) for one workload, else a YAML stream with one
// document per workload, each preceded by the kubectl command that applies
// it. A workload with too few terminations gets no patch: stderr says why.
// One that needs no change gets {}.
func (f adviseFlags) printPatches(ctx context.Context, stdout, stderr io.Writer, advices []advise.Advice) error {
	api, err := f.workloadAPI()
	if err != nil {
		return err
	}
	native, err := api.nativeSleep()
	if err != nil {
		return err
	}
	single := len(advices) == 1 && (f.workload != "" || !f.allNamespaces)
	docs := 0
	for _, a := range advices {
		name := collector.Printable(a.Workload.String())
		if !a.Enough {
			fmt.Fprintf(stderr, "drainwatch advise: %s: %s\n", name, strings.Join(a.Why, "; "))
			continue
		}
		spec, err := api.podSpec(ctx, a.Workload)
		if err != nil {
			fmt.Fprintln(stderr, "drainwatch advise:", collector.Printable(err.Error()))
			continue
		}
		patch, notes, err := advise.Patch(a, spec, native)
		if err != nil {
			return err
		}
		for _, n := range notes {
			fmt.Fprintf(stderr, "drainwatch advise: %s: %s\n", name, n)
		}
		if patch == nil {
			patch = []byte("{}")
		}
		if !single {
			if docs > 0 {
				fmt.Fprintln(stdout, "---")
			}
			fmt.Fprintf(stdout, "# kubectl patch -n %s %s/%s --type strategic --patch-file THIS-DOCUMENT\n",
				collector.Printable(a.Workload.Namespace), strings.ToLower(a.Workload.Kind), collector.Printable(a.Workload.Name))
		}
		fmt.Fprintf(stdout, "%s\n", patch)
		docs++
	}
	return nil
}
