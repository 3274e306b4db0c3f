package advise

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// DefaultGraceSeconds is the API's terminationGracePeriodSeconds when the
// spec sets none.
const DefaultGraceSeconds = 30

// NativeSleepMinor is the first Kubernetes 1.x whose API serves the preStop
// sleep action by default (GA in 1.34).
const NativeSleepMinor = 34

// execSleep matches an exec preStop that only sleeps: ["sleep","N"] or a
// shell running "sleep N". The admission policy's CEL reads the same forms.
var execSleep = regexp.MustCompile(`^(?:(?:/bin/)?sleep (\d+)|(?:/bin/)?(?:ba)?sh -c sleep (\d+))$`)

// CurrentSleep is a container's preStop sleep in seconds: the sleep action,
// or an exec hook that only sleeps. ok is false for any other hook; a
// container without a preStop hook sleeps 0.
func CurrentSleep(c corev1.Container) (seconds int64, ok bool) {
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		return 0, true
	}
	h := c.Lifecycle.PreStop
	switch {
	case h.Sleep != nil:
		return h.Sleep.Seconds, true
	case h.Exec != nil:
		m := execSleep.FindStringSubmatch(strings.Join(h.Exec.Command, " "))
		if m == nil {
			return 0, false
		}
		n, err := strconv.ParseInt(m[1]+m[2], 10, 64)
		return n, err == nil
	}
	return 0, false
}

// change is what an advice changes in a pod template: the indexes of the
// containers that get the sleep (their preStop absent or a shorter sleep),
// whether the grace period is raised, and notes for what it leaves alone.
type change struct {
	containers []int
	grace      bool
	notes      []string
}

// changeOf decides what a changes in spec; both patch forms build on it.
func changeOf(a Advice, spec corev1.PodSpec, native bool) change {
	var ch change
	for i, c := range spec.Containers {
		cur, ok := CurrentSleep(c)
		if !ok {
			ch.notes = append(ch.notes, fmt.Sprintf("container %s has a preStop hook other than a sleep: left alone; make it wait %d s before the server stops", c.Name, a.PrestopSleepSeconds))
			continue
		}
		if cur < a.PrestopSleepSeconds {
			ch.containers = append(ch.containers, i)
		}
	}
	if len(ch.containers) > 0 && !native {
		ch.notes = append(ch.notes, "this API server does not serve the preStop sleep action (Kubernetes < 1.34): the patch runs /bin/sh -c sleep, so the image needs a shell")
	}
	ch.grace = graceOf(spec) < a.TerminationGraceSeconds
	return ch
}

// Patch is the strategic-merge patch that gives spec a's values, for the
// pod template of a Deployment, StatefulSet or DaemonSet: the sleep on
// every container whose preStop is absent or a shorter sleep (native when
// the API serves it, else an exec of /bin/sh), the grace period when the
// spec's is shorter. It returns nil when nothing needs to change, and
// notes for containers whose hook it leaves alone.
func Patch(a Advice, spec corev1.PodSpec, native bool) (patch []byte, notes []string, err error) {
	if !a.Enough {
		return nil, nil, nil
	}
	ch := changeOf(a, spec, native)
	podPatch := map[string]any{}
	var containers []any
	for _, i := range ch.containers {
		containers = append(containers, map[string]any{"name": spec.Containers[i].Name, "lifecycle": map[string]any{"preStop": sleepHandler(a.PrestopSleepSeconds, native)}})
	}
	if len(containers) > 0 {
		podPatch["containers"] = containers
	}
	if ch.grace {
		podPatch["terminationGracePeriodSeconds"] = a.TerminationGraceSeconds
	}
	if len(podPatch) == 0 {
		return nil, ch.notes, nil
	}
	patch, err = json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": podPatch}}})
	return patch, ch.notes, err
}

// sleepHandler replaces whatever sleep the hook had: null removes the
// other handler field in a strategic merge.
func sleepHandler(seconds int64, native bool) map[string]any {
	if native {
		return map[string]any{"sleep": map[string]any{"seconds": seconds}, "exec": nil}
	}
	return map[string]any{"exec": map[string]any{"command": []string{"/bin/sh", "-c", fmt.Sprintf("sleep %d", seconds)}}, "sleep": nil}
}

func graceOf(spec corev1.PodSpec) int64 {
	if spec.TerminationGracePeriodSeconds == nil {
		return DefaultGraceSeconds
	}
	return *spec.TerminationGracePeriodSeconds
}
