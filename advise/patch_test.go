package advise

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/drainwatch/drainwatch/correlate"
)

func enough() Advice {
	t := term(1520*time.Millisecond, 300*time.Millisecond)
	return Advise([]correlate.Termination{t, t, t}, DefaultRule)[0] // sleep 3, grace 5
}

func withHook(name string, h *corev1.LifecycleHandler) corev1.Container {
	c := corev1.Container{Name: name}
	if h != nil {
		c.Lifecycle = &corev1.Lifecycle{PreStop: h}
	}
	return c
}

func TestCurrentSleep(t *testing.T) {
	for _, c := range []struct {
		h    *corev1.LifecycleHandler
		want int64
		ok   bool
	}{
		{nil, 0, true},
		{&corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 4}}, 4, true},
		{&corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "5"}}}, 5, true},
		{&corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "sleep 6"}}}, 6, true},
		{&corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"nginx", "-s", "quit"}}}, 0, false},
		{&corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/stop"}}, 0, false},
	} {
		got, ok := CurrentSleep(withHook("c", c.h))
		if got != c.want || ok != c.ok {
			t.Errorf("%+v: %d %v, want %d %v", c.h, got, ok, c.want, c.ok)
		}
	}
}

func TestPatch(t *testing.T) {
	a := enough()
	thirty, two := int64(30), int64(2)
	for name, c := range map[string]struct {
		spec   corev1.PodSpec
		native bool
		want   string
		notes  int
	}{
		"none yet, native": {corev1.PodSpec{Containers: []corev1.Container{withHook("web", nil)}, TerminationGracePeriodSeconds: &two}, true,
			`{"spec":{"template":{"spec":{"containers":[{"lifecycle":{"preStop":{"exec":null,"sleep":{"seconds":3}}},"name":"web"}],"terminationGracePeriodSeconds":5}}}}`, 0},
		"exec before 1.34": {corev1.PodSpec{Containers: []corev1.Container{withHook("web", nil)}, TerminationGracePeriodSeconds: &thirty}, false,
			`{"spec":{"template":{"spec":{"containers":[{"lifecycle":{"preStop":{"exec":{"command":["/bin/sh","-c","sleep 3"]},"sleep":null}},"name":"web"}]}}}}`, 1},
		"already enough": {corev1.PodSpec{Containers: []corev1.Container{withHook("web", &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 3}})}, TerminationGracePeriodSeconds: &thirty}, true, ``, 0},
		"other hook left alone": {corev1.PodSpec{Containers: []corev1.Container{withHook("web", &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{}}), withHook("proxy", nil)}}, true,
			`{"spec":{"template":{"spec":{"containers":[{"lifecycle":{"preStop":{"exec":null,"sleep":{"seconds":3}}},"name":"proxy"}]}}}}`, 1},
	} {
		p, notes, err := Patch(a, c.spec, c.native)
		if err != nil || string(p) != c.want || len(notes) != c.notes {
			t.Errorf("%s: %s %q %v\nwant %s", name, p, notes, err, c.want)
		}
	}
}
