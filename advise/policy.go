package advise

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Names of what --emit-policy writes. The binding looks its parameters up
// by name in the admitted object's own namespace: one ConfigMap per
// namespace, and a namespace without one is not checked.
const (
	PolicyName      = "drainwatch-measured-minimums"
	ParamsConfigMap = "drainwatch-minimums"
)

// ParamKey is a workload's key prefix in the parameters ConfigMap: the
// kind in lower case and the name ("deployment.web"); the keys are
// <prefix>.prestop_seconds, .grace_seconds and .evidence.
func ParamKey(kind, name string) string { return strings.ToLower(kind) + "." + name }

// The policy's CEL. measuredCEL is false for an object without a pod
// template (a Rollout with spec.workloadRef): the checks are then true
// before sleepCEL or graceCEL would read a field that is not there. sleepCEL
// reads a container's preStop sleep as CurrentSleep does: the sleep action,
// or an exec that only sleeps.
const (
	keyCEL      = `object.kind.lowerAscii() + '.' + object.metadata.name`
	measuredCEL = `has(object.spec.template) && has(object.spec.template.spec) && ` +
		`params != null && has(params.data) && (variables.key + '.prestop_seconds') in params.data`
	sleepCEL = `object.spec.template.spec.containers.map(c, ` +
		`!has(c.lifecycle) || !has(c.lifecycle.preStop) ? 0 : ` +
		`has(c.lifecycle.preStop.sleep) ? c.lifecycle.preStop.sleep.seconds : ` +
		`has(c.lifecycle.preStop.exec) && has(c.lifecycle.preStop.exec.command) && ` +
		`c.lifecycle.preStop.exec.command.join(' ').matches('^((/bin/)?sleep [0-9]+|(/bin/)?(ba)?sh -c sleep [0-9]+)$') ? ` +
		`int(c.lifecycle.preStop.exec.command.join(' ').find('[0-9]+$')) : 0).max()`
	graceCEL = `has(object.spec.template.spec.terminationGracePeriodSeconds) ? ` +
		`object.spec.template.spec.terminationGracePeriodSeconds : 30`
	prestopCheck   = `!variables.measured || variables.sleep >= int(params.data[variables.key + '.prestop_seconds'])`
	prestopMessage = `object.kind + ' ' + object.metadata.name + ': preStop sleep ' + string(variables.sleep) + ' s is below the ' + ` +
		`params.data[variables.key + '.prestop_seconds'] + ' s drainwatch measured on this cluster (' + params.data[variables.key + '.evidence'] + ')'`
	graceCheck   = `!variables.measured || variables.grace >= int(params.data[variables.key + '.grace_seconds'])`
	graceMessage = `object.kind + ' ' + object.metadata.name + ': terminationGracePeriodSeconds ' + string(variables.grace) + ' is below the ' + ` +
		`params.data[variables.key + '.grace_seconds'] + ' s drainwatch measured on this cluster (' + params.data[variables.key + '.evidence'] + ')'`
)

// Policy is the ValidatingAdmissionPolicy that warns (and audits) when a
// Deployment, StatefulSet or Argo Rollout sleeps less in preStop, or gives
// less grace, than its measured minimums. A Rollout with spec.workloadRef
// has no template to check: it is matched and passes.
func Policy() *admissionv1.ValidatingAdmissionPolicy {
	ignore := admissionv1.Ignore
	return &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: PolicyName, Labels: managedBy()},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &ignore,
			ParamKind:     &admissionv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{
				createOrUpdate(admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments", "statefulsets"}}),
				createOrUpdate(admissionv1.Rule{APIGroups: []string{"argoproj.io"}, APIVersions: []string{"v1alpha1"}, Resources: []string{"rollouts"}}),
			}},
			Variables: []admissionv1.Variable{
				{Name: "key", Expression: keyCEL}, {Name: "measured", Expression: measuredCEL},
				{Name: "sleep", Expression: sleepCEL}, {Name: "grace", Expression: graceCEL},
			},
			Validations: []admissionv1.Validation{
				{Expression: prestopCheck, MessageExpression: prestopMessage, Reason: ptr(metav1.StatusReasonInvalid)},
				{Expression: graceCheck, MessageExpression: graceMessage, Reason: ptr(metav1.StatusReasonInvalid)},
			},
		},
	}
}

// createOrUpdate matches r's objects when they are created or updated.
func createOrUpdate(r admissionv1.Rule) admissionv1.NamedRuleWithOperations {
	return admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
		Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update}, Rule: r,
	}}
}

// Binding applies the policy everywhere with Warn and Audit (never Deny),
// its parameters from each namespace's ConfigMap, none: not checked.
func Binding() *admissionv1.ValidatingAdmissionPolicyBinding {
	allow := admissionv1.AllowAction
	return &admissionv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: PolicyName, Labels: managedBy()},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        PolicyName,
			ParamRef:          &admissionv1.ParamRef{Name: ParamsConfigMap, ParameterNotFoundAction: &allow},
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Warn, admissionv1.Audit},
		},
	}
}

// Params are the parameter ConfigMaps, one per namespace, holding the
// minimums of every workload with enough terminations.
func Params(advices []Advice) []*corev1.ConfigMap {
	by := map[string]*corev1.ConfigMap{}
	var order []string
	for _, a := range advices {
		if !a.Enough {
			continue
		}
		cm := by[a.Workload.Namespace]
		if cm == nil {
			cm = &corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Name: ParamsConfigMap, Namespace: a.Workload.Namespace, Labels: managedBy()},
				Data:       map[string]string{},
			}
			by[a.Workload.Namespace] = cm
			order = append(order, a.Workload.Namespace)
		}
		key := ParamKey(a.Workload.Kind, a.Workload.Name)
		cm.Data[key+".prestop_seconds"] = strconv.FormatInt(a.PrestopSleepSeconds, 10)
		cm.Data[key+".grace_seconds"] = strconv.FormatInt(a.TerminationGraceSeconds, 10)
		cm.Data[key+".evidence"] = evidence(a)
	}
	slices.Sort(order)
	out := make([]*corev1.ConfigMap, len(order))
	for i, ns := range order {
		out[i] = by[ns]
	}
	return out
}

// evidence is the one line the warning quotes: the numbers and the rule.
func evidence(a Advice) string {
	return fmt.Sprintf("routing lag %s, drain %s at the rule's percentile over %d terminations; rule: %s",
		sec(time.Duration(a.RoutingLag.P)), sec(time.Duration(a.Drain.P)), a.RoutingLag.N, a.Rule)
}

// WritePolicy writes the policy, its binding and the parameters as one
// YAML stream for kubectl apply -f.
func WritePolicy(advices []Advice) ([]byte, error) {
	objs := []any{Policy(), Binding()}
	for _, cm := range Params(advices) {
		objs = append(objs, cm)
	}
	var b bytes.Buffer
	for i, o := range objs {
		y, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("writing the admission policy: %w", err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return b.Bytes(), nil
}

func managedBy() map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": "drainwatch"}
}

func ptr[T any](v T) *T { return &v }
