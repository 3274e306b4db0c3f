package advise

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestJSONPatch(t *testing.T) {
	two := int64(2)
	sleep := func(n int64) *corev1.LifecycleHandler {
		return &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: n}}
	}
	postStartOnly := corev1.Container{Name: "web", Lifecycle: &corev1.Lifecycle{PostStart: sleep(1)}}
	const c0 = `{"op":"test","path":"/spec/template/spec/containers/0/name","value":"web"},`
	for name, c := range map[string]struct {
		advice Advice
		spec   corev1.PodSpec
		native bool
		want   string
		notes  int
	}{
		"no lifecycle, grace 2": {enough(), corev1.PodSpec{Containers: []corev1.Container{withHook("web", nil)}, TerminationGracePeriodSeconds: &two}, true,
			`[` + c0 + `{"op":"add","path":"/spec/template/spec/containers/0/lifecycle","value":{"preStop":{"sleep":{"seconds":3}}}},` +
				`{"op":"replace","path":"/spec/template/spec/terminationGracePeriodSeconds","value":5}]`, 0},
		"a shorter exec sleep, default grace": {enough(), corev1.PodSpec{Containers: []corev1.Container{withHook("web", &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "1"}}})}}, true,
			`[` + c0 + `{"op":"replace","path":"/spec/template/spec/containers/0/lifecycle/preStop","value":{"sleep":{"seconds":3}}}]`, 0},
		"a lifecycle without preStop": {enough(), corev1.PodSpec{Containers: []corev1.Container{postStartOnly}}, true,
			`[` + c0 + `{"op":"add","path":"/spec/template/spec/containers/0/lifecycle/preStop","value":{"sleep":{"seconds":3}}}]`, 0},
		"exec before 1.34": {enough(), corev1.PodSpec{Containers: []corev1.Container{withHook("web", sleep(2))}}, false,
			`[` + c0 + `{"op":"replace","path":"/spec/template/spec/containers/0/lifecycle/preStop","value":{"exec":{"command":["/bin/sh","-c","sleep 3"]}}}]`, 1},
		"grace unset, advice above 30": {Advice{Enough: true, PrestopSleepSeconds: 3, TerminationGraceSeconds: 40}, corev1.PodSpec{Containers: []corev1.Container{withHook("web", sleep(3))}}, true,
			`[{"op":"add","path":"/spec/template/spec/terminationGracePeriodSeconds","value":40}]`, 0},
		"other hook left alone": {enough(), corev1.PodSpec{Containers: []corev1.Container{withHook("web", &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{}}), withHook("proxy", nil)}}, true,
			`[{"op":"test","path":"/spec/template/spec/containers/1/name","value":"proxy"},` +
				`{"op":"add","path":"/spec/template/spec/containers/1/lifecycle","value":{"preStop":{"sleep":{"seconds":3}}}}]`, 1},
		"already enough":       {enough(), corev1.PodSpec{Containers: []corev1.Container{withHook("web", sleep(3))}}, true, ``, 0},
		"too few terminations": {Advice{}, corev1.PodSpec{Containers: []corev1.Container{withHook("web", nil)}}, true, ``, 0},
	} {
		p, notes, err := JSONPatch(c.advice, c.spec, c.native)
		if err != nil || string(p) != c.want || len(notes) != c.notes {
			t.Errorf("%s: %s %q %v\nwant %s", name, p, notes, err, c.want)
		}
	}
}

func TestReadRollout(t *testing.T) {
	templated := map[string]any{"metadata": map[string]any{"name": "web"}, "spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"terminationGracePeriodSeconds": int64(5),
		"containers":                    []any{map[string]any{"name": "server", "lifecycle": map[string]any{"preStop": map[string]any{"sleep": map[string]any{"seconds": int64(2)}}}}},
	}}}}
	got, err := ReadRollout(templated)
	if err != nil || got.Deployment != "" || len(got.Spec.Containers) != 1 || *got.Spec.TerminationGracePeriodSeconds != 5 {
		t.Fatalf("%+v %v", got, err)
	}
	if s, ok := CurrentSleep(got.Spec.Containers[0]); s != 2 || !ok {
		t.Errorf("sleep %d %v", s, ok)
	}
	ref := func(kind string) map[string]any {
		return map[string]any{"metadata": map[string]any{"name": "web"}, "spec": map[string]any{"workloadRef": map[string]any{"apiVersion": "apps/v1", "kind": kind, "name": "web-base"}}}
	}
	if got, err := ReadRollout(ref("Deployment")); err != nil || got.Deployment != "web-base" {
		t.Errorf("workloadRef Deployment: %+v %v", got, err)
	}
	if _, err := ReadRollout(ref("ReplicaSet")); err == nil || err.Error() != `Rollout web: spec.workloadRef names a "ReplicaSet": advise patches a referenced Deployment only` {
		t.Errorf("workloadRef ReplicaSet: %v", err)
	}
	if _, err := ReadRollout(map[string]any{"metadata": map[string]any{"name": "web"}}); err == nil {
		t.Error("a Rollout with neither template nor workloadRef read without an error")
	}
}
