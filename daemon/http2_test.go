package daemon

import (
	"testing"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/collector/kernel"
)

func TestHTTP2PodsDriveTheMessageProbes(t *testing.T) {
	var h http2Pods
	steps := []struct {
		name        string
		apply       func() (bool, bool)
		on, changed bool
	}{
		{"a plain pod", func() (bool, bool) { return h.podUpdate(collector.Pod{UID: "a"}) }, false, false},
		{"a gRPC pod", func() (bool, bool) { return h.podUpdate(collector.Pod{UID: "b", HTTP2: true}) }, true, true},
		{"a second one", func() (bool, bool) { return h.podUpdate(collector.Pod{UID: "c", HTTP2: true}) }, true, false},
		{"the first deleted", func() (bool, bool) { return h.podDeleted("b") }, true, false},
		{"the second loses its port", func() (bool, bool) { return h.podUpdate(collector.Pod{UID: "c"}) }, false, true},
		{"an unknown pod deleted", func() (bool, bool) { return h.podDeleted("z") }, false, false},
	}
	for _, s := range steps {
		if on, changed := s.apply(); on != s.on || changed != s.changed {
			t.Errorf("%s: on %v changed %v, want %v %v", s.name, on, changed, s.on, s.changed)
		}
	}
}

func TestMessageProbesMode(t *testing.T) {
	for in, want := range map[string]kernel.MessageProbes{
		"": kernel.MessageProbesOnDemand, "auto": kernel.MessageProbesOnDemand,
		"always": kernel.MessageProbesAlways, "off": kernel.MessageProbesOff,
	} {
		if got, err := messageProbesMode(in); err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	if _, err := messageProbesMode("on"); err == nil {
		t.Error(`"on" accepted`)
	}
}
