package promtest

import "testing"

// TestStaticConfigs: one static config per target, with its labels.
func TestStaticConfigs(t *testing.T) {
	got := staticConfigs(Options{Targets: []string{"127.0.0.1:1", "127.0.0.1:2"},
		TargetLabels: map[string]map[string]string{"127.0.0.1:1": {"node": "lab-1"}}})
	want := `      - targets: ["127.0.0.1:1"]
        labels:
          node: "lab-1"
      - targets: ["127.0.0.1:2"]
`
	if got != want {
		t.Errorf("staticConfigs =\n%s\nwant\n%s", got, want)
	}
}
