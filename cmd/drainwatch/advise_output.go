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

// printPatches writes a patch per workload: a strategic merge for a
// Deployment, StatefulSet or DaemonSet, a JSON patch for an Argo Rollout
// (a custom resource takes no strategic merge). One workload: the patch
// alone (for kubectl patch -p); several: a YAML stream with one document
// per workload, each preceded by the kubectl command that applies it, with
// its --type. A workload with too few terminations gets no patch: stderr
// says why. One that needs no change gets {} (or [] for a JSON patch).
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
		t, err := api.target(ctx, a.Workload)
		if err != nil {
			fmt.Fprintln(stderr, "drainwatch advise:", collector.Printable(err.Error()))
			continue
		}
		patch, patchType, notes, err := patchOf(a, t, native)
		if err != nil {
			return err
		}
		if t.note != "" {
			notes = append([]string{t.note}, notes...)
		}
		for _, n := range notes {
			fmt.Fprintf(stderr, "drainwatch advise: %s: %s\n", name, collector.Printable(n))
		}
		if !single {
			if docs > 0 {
				fmt.Fprintln(stdout, "---")
			}
			fmt.Fprintf(stdout, "# kubectl patch -n %s %s/%s --type %s --patch-file THIS-DOCUMENT\n",
				collector.Printable(t.ref.Namespace), strings.ToLower(t.ref.Kind), collector.Printable(t.ref.Name), patchType)
		}
		fmt.Fprintf(stdout, "%s\n", patch)
		docs++
	}
	return nil
}

// patchOf is a's patch of t and its kubectl --type: a JSON patch for a
// Rollout, else a strategic merge. Nothing to change is [] or {}, which
// kubectl applies as "patched (no change)".
func patchOf(a advise.Advice, t patchTarget, native bool) (patch []byte, patchType string, notes []string, err error) {
	if t.ref.Kind == "Rollout" {
		patch, notes, err = advise.JSONPatch(a, t.spec, native)
		if patch == nil {
			patch = []byte("[]")
		}
		return patch, "json", notes, err
	}
	patch, notes, err = advise.Patch(a, t.spec, native)
	if patch == nil {
		patch = []byte("{}")
	}
	return patch, "strategic", notes, err
}
