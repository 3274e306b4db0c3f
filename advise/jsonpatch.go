package advise

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// jsonOp is one RFC 6902 operation.
type jsonOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// podSpecPath is where a Rollout keeps its pod template's spec.
const podSpecPath = "/spec/template/spec"

// JSONPatch is the JSON patch (RFC 6902, kubectl patch --type json) that
// gives spec a's values, for an Argo Rollout: custom resources take no
// strategic merge, so containers are addressed by index. Each changed
// container's ops start with a test of its name, so that a patch applied
// to a spec whose containers moved fails instead of patching another
// container; its preStop handler is replaced whole (no exec left beside a
// sleep). The containers and the grace period changed are Patch's. It
// returns nil when nothing needs to change.
func JSONPatch(a Advice, spec corev1.PodSpec, native bool) (patch []byte, notes []string, err error) {
	if !a.Enough {
		return nil, nil, nil
	}
	ch := changeOf(a, spec, native)
	var ops []jsonOp
	for _, i := range ch.containers {
		ops = append(ops, containerOps(i, spec.Containers[i], jsonSleepHandler(a.PrestopSleepSeconds, native))...)
	}
	if ch.grace {
		op := "replace"
		if spec.TerminationGracePeriodSeconds == nil {
			op = "add"
		}
		ops = append(ops, jsonOp{Op: op, Path: podSpecPath + "/terminationGracePeriodSeconds", Value: a.TerminationGraceSeconds})
	}
	if len(ops) == 0 {
		return nil, ch.notes, nil
	}
	patch, err = json.Marshal(ops)
	return patch, ch.notes, err
}

// containerOps set container i's preStop handler to h: add the lifecycle
// when it has none, add the preStop to a lifecycle without one, else
// replace the preStop.
func containerOps(i int, c corev1.Container, h map[string]any) []jsonOp {
	path := fmt.Sprintf("%s/containers/%d", podSpecPath, i)
	ops := []jsonOp{{Op: "test", Path: path + "/name", Value: c.Name}}
	switch {
	case c.Lifecycle == nil:
		return append(ops, jsonOp{Op: "add", Path: path + "/lifecycle", Value: map[string]any{"preStop": h}})
	case c.Lifecycle.PreStop == nil:
		return append(ops, jsonOp{Op: "add", Path: path + "/lifecycle/preStop", Value: h})
	}
	return append(ops, jsonOp{Op: "replace", Path: path + "/lifecycle/preStop", Value: h})
}

// jsonSleepHandler is a preStop handler that only sleeps: the handler is
// replaced whole, so it needs no null for the other field (a custom
// resource's schema would drop it anyway).
func jsonSleepHandler(seconds int64, native bool) map[string]any {
	if native {
		return map[string]any{"sleep": map[string]any{"seconds": seconds}}
	}
	return map[string]any{"exec": map[string]any{"command": []string{"/bin/sh", "-c", fmt.Sprintf("sleep %d", seconds)}}}
}
