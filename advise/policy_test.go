package advise

import (
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/correlate"
)

func TestParamsOnlyForWorkloadsWithEnoughTerminations(t *testing.T) {
	few := term(time.Second, time.Second)
	few.Workload.Name = "api"
	advices := Advise([]correlate.Termination{term(1520*time.Millisecond, 300*time.Millisecond), term(time.Second, time.Second), term(time.Second, time.Second), few}, DefaultRule)
	cms := Params(advices)
	if len(cms) != 1 || cms[0].Namespace != "shop" || cms[0].Name != ParamsConfigMap || len(cms[0].Data) != 3 {
		t.Fatalf("%+v", cms)
	}
	if d := cms[0].Data; d["deployment.web.prestop_seconds"] != "3" || d["deployment.web.grace_seconds"] != "5" ||
		d["deployment.web.evidence"] != "routing lag 1.520s, drain 1.000s at the rule's percentile over 3 terminations; rule: p99 over at least 3 terminations, margin 1s" {
		t.Errorf("data %v", d)
	}
	y, err := WritePolicy(advices)
	if err != nil || strings.Count(string(y), "\n---\n") != 2 || !strings.Contains(string(y), "- Warn\n  - Audit\n") {
		t.Errorf("%v\n%s", err, y)
	}
}

func TestPolicyMatchesRollouts(t *testing.T) {
	var matched []string
	for _, r := range Policy().Spec.MatchConstraints.ResourceRules {
		matched = append(matched, strings.Join(r.APIGroups, ",")+"/"+strings.Join(r.APIVersions, ",")+"/"+strings.Join(r.Resources, ","))
	}
	if got := strings.Join(matched, " "); got != "apps/v1/deployments,statefulsets argoproj.io/v1alpha1/rollouts" {
		t.Errorf("matched %s", got)
	}
	if k := ParamKey("Rollout", "web"); k != "rollout.web" {
		t.Errorf("ParamKey %s", k)
	}
}
