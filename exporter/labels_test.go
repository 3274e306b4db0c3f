package exporter

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/drainwatch/drainwatch/collector"
)

// TestRolloutLabelsBounded: values from the cluster become labels of at
// most 253 bytes of valid UTF-8, whatever the annotation held.
func TestRolloutLabelsBounded(t *testing.T) {
	long := strings.Repeat("€", 200) // 600 bytes, cut at a character
	got := rolloutLabels(collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: long + "\xff"})
	want := [4]string{"shop", "Deployment", "web", strings.Repeat("€", 84)} // 252 bytes
	if got != want {
		t.Fatalf("labels %q, want %q", got, want)
	}
	for _, v := range got {
		if len(v) > collector.MaxValueBytes || !utf8.ValidString(v) {
			t.Errorf("label value of %d bytes, valid UTF-8 %v", len(v), utf8.ValidString(v))
		}
	}
	if got := labelValue("7\xff"); got != "7\uFFFD" {
		t.Errorf("labelValue(invalid UTF-8) = %q", got)
	}
}
