package correlate

import (
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// The grace period follows the kubelet's rule (grace.go): the first
// deletion sets it (floor 1 s), a later one while a container runs may
// only shorten it, updates after every container terminated change nothing.
func TestGracePeriod(t *testing.T) {
	spec := 30 * time.Second
	del := func(grace time.Duration, at int) collector.PodUpdate {
		return deleting(podA, ipA, grace, ms(-20), ms(at))
	}
	finished := func(grace time.Duration, at int) collector.PodUpdate {
		u := finalDelete(podA, ipA, spec, ms(-20), ms(at))
		u.Pod.DeletionGracePeriod = grace
		return u
	}
	tests := []struct {
		name    string
		updates []any
		want    time.Duration
	}{
		{"the first deletion sets it", []any{del(spec, -10)}, spec},
		{"the kubelet's final delete with grace 0 changes nothing", []any{del(spec, -10), finished(0, 2500)}, spec},
		{"a shorter grace while running shortens it", []any{del(spec, -10), del(5*time.Second, 100)}, 5 * time.Second},
		{"a longer grace is ignored", []any{del(5*time.Second, -10), del(spec, 100)}, 5 * time.Second},
		{"a force delete while running: the kubelet's 1 s floor", []any{del(spec, -10), del(0, 100)}, time.Second},
		{"a shorter grace after every container terminated changes nothing", []any{del(spec, -10), finished(5*time.Second, 2500)}, spec},
		{"a force delete from the start: 1 s", []any{del(0, -10)}, time.Second},
		{"only the final delete seen: the pod's own grace", []any{finished(0, 2500)}, spec},
		{"no deletion seen: the pod's own grace", []any{gone(podA, ms(100))}, spec},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{})
			feed(c, []any{born(podA, ipA, netA, cgA, spec, ms(-60000)), tc.updates})
			got, ok := c.Get(podA)
			if !ok || got.GracePeriod != tc.want {
				t.Errorf("grace period %v (termination %v), want %v", got.GracePeriod, ok, tc.want)
			}
		})
	}
}
