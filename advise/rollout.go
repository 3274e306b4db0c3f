package advise

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// RolloutTemplate is where an Argo Rollout's pods come from: its own
// spec.template, or, with spec.workloadRef, the pod template of the
// Deployment it names. Argo's controller follows that Deployment's
// template, so a patch for such a Rollout goes to the Deployment (a
// strategic merge), not to the Rollout, which has no template to patch.
type RolloutTemplate struct {
	// Spec is the Rollout's spec.template.spec; empty with a workloadRef.
	Spec corev1.PodSpec
	// Deployment names spec.workloadRef's Deployment, else is empty.
	Deployment string
}

// ReadRollout reads a Rollout (argoproj.io/v1alpha1, as the dynamic client
// returns it) into the pod spec advise patches.
func ReadRollout(obj map[string]any) (RolloutTemplate, error) {
	name, _, _ := unstructured.NestedString(obj, "metadata", "name")
	spec, found, err := unstructured.NestedMap(obj, "spec", "template", "spec")
	if err != nil {
		return RolloutTemplate{}, fmt.Errorf("Rollout %s: spec.template.spec: %w", name, err)
	}
	if found {
		var t RolloutTemplate
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &t.Spec); err != nil {
			return t, fmt.Errorf("Rollout %s: reading spec.template.spec as a pod spec: %w", name, err)
		}
		return t, nil
	}
	kind, _, _ := unstructured.NestedString(obj, "spec", "workloadRef", "kind")
	ref, _, _ := unstructured.NestedString(obj, "spec", "workloadRef", "name")
	switch {
	case ref == "":
		return RolloutTemplate{}, fmt.Errorf("Rollout %s has neither spec.template nor spec.workloadRef: nothing to patch", name)
	case kind != "Deployment":
		return RolloutTemplate{}, fmt.Errorf("Rollout %s: spec.workloadRef names a %q: advise patches a referenced Deployment only", name, kind)
	}
	return RolloutTemplate{Deployment: ref}, nil
}
