package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func scopePod(uid, ns string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Namespace: ns, Name: uid, Labels: labels}}
}

func TestPodScope(t *testing.T) {
	s, err := ParsePodScope(" shop, web ,shop", "", "app=web,tier!=batch")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.String(); got != "namespaces shop,web; labels app=web,tier!=batch" {
		t.Errorf("String() = %q", got)
	}
	for _, c := range []struct {
		pod  *corev1.Pod
		want bool
	}{
		{scopePod("a", "shop", map[string]string{"app": "web"}), true},
		{scopePod("b", "web", map[string]string{"app": "web", "tier": "front"}), true},
		{scopePod("c", "web", map[string]string{"app": "web", "tier": "batch"}), false},
		{scopePod("d", "kube-system", map[string]string{"app": "web"}), false},
		{scopePod("e", "shop", nil), false},
	} {
		if got := s.Admits(c.pod); got != c.want {
			t.Errorf("Admits(%s/%s %v) = %v, want %v", c.pod.Namespace, c.pod.Name, c.pod.Labels, got, c.want)
		}
	}
	ex, err := ParsePodScope("", "kube-system,batch", "")
	if err != nil {
		t.Fatal(err)
	}
	if ex.Admits(scopePod("f", "batch", nil)) || !ex.Admits(scopePod("g", "shop", nil)) {
		t.Error("--exclude-namespaces kube-system,batch: batch admitted or shop left out")
	}
	all, err := ParsePodScope("", "", "")
	if err != nil || !all.All() || all.String() != "every pod" {
		t.Errorf("the empty scope: %v %v %q", err, all.All(), all.String())
	}
	for _, bad := range [][3]string{{"Shop", "", ""}, {"", "a_b", ""}, {"", "", "app in (web"}, {"shop", "shop", ""}} {
		if _, err := ParsePodScope(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("ParsePodScope(%q) accepted", bad)
		}
	}
}

// TestScopeMemory: a pod is decided at first sight; one admitted stays
// observed through a label change until deleted, one left out stays out.
func TestScopeMemory(t *testing.T) {
	s, _ := ParsePodScope("", "", "app=web")
	m := scopeMemory{scope: s}
	in, out := scopePod("in", "shop", map[string]string{"app": "web"}), scopePod("out", "shop", nil)
	if !m.admits(in) || m.admits(out) {
		t.Fatal("first sight: web not admitted or unlabelled admitted")
	}
	in.Labels = nil
	if !m.admits(in) {
		t.Error("an admitted pod whose label was removed left the scope mid-life")
	}
	if !m.forget(in) || m.forget(out) {
		t.Error("forget: the admitted pod not reported observed, or the other one reported")
	}
	if m.admits(in) {
		t.Error("a deleted pod's memory outlived it")
	}
	if len(m.admitted) != 0 {
		t.Errorf("memory holds %d pods after their deletion", len(m.admitted))
	}
}
