package main

import "testing"

func TestTable(t *testing.T) {
	out := `noise
    vm_test.go:102: MATRIX kernel=6.18.44 arch=amd64 feature=refused state=exact got=5 want=5
MATRIX kernel=6.18.44 arch=amd64 feature=inflight_sigkill state=exact got=2 want=2
MATRIX kernel=5.10.0-32-cloud-amd64 arch=amd64 feature=refused state=fallback got=5 want=5
MATRIX kernel=5.10.0-32-cloud-amd64 arch=amd64 feature=inflight_sigkill state=fallback got=0 want=2
`
	m, err := parse(out)
	if err != nil {
		t.Fatal(err)
	}
	want := `| feature | 6.18.44 amd64 | 5.10.0-32-cloud-amd64 amd64 |
|---|---|---|
| refused | exact | fallback |
| inflight_sigkill | exact | fallback (counted 0 of 2) |
`
	if got := m.table(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	doc := "a\n" + beginMarker + "\nold\n" + endMarker + "\nb\n"
	got, err := replaceBetweenMarkers(doc, "T\n")
	if err != nil || got != "a\n"+beginMarker+"\nT\n"+endMarker+"\nb\n" {
		t.Errorf("replaced: %q, %v", got, err)
	}
}
