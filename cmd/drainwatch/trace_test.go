package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/collector/kernel"
)

func TestParseTraceFlags(t *testing.T) {
	f, err := parseTraceFlags([]string{"--netns", "/run/netns/x", "--pid", "42", "--format", "text"}, io.Discard)
	if err != nil || f.netns != "/run/netns/x" || f.pid != 42 || f.format != "text" || f.watchAll() {
		t.Fatalf("got %+v, %v", f, err)
	}
	if f, err := parseTraceFlags(nil, io.Discard); err != nil || !f.watchAll() || f.format != "json" {
		t.Fatalf("defaults: %+v, %v", f, err)
	}
	for _, bad := range [][]string{{"--format", "yaml"}, {"extra"}, {"--pid", "x"}} {
		if _, err := parseTraceFlags(bad, io.Discard); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestWriteJSON(t *testing.T) {
	exit := collector.Event{Type: collector.EventExit, Time: time.Unix(1, 5), PID: 7, ExitCode: 0}
	refused := collector.Event{Type: collector.EventRefused, Reason: 1,
		Local: netip.MustParseAddrPort("10.251.0.2:9"), Remote: netip.MustParseAddrPort("10.251.0.1:4000")}
	inflight := collector.Event{Type: collector.EventConnClosedInflight, Cause: collector.CauseSigkill}
	var buf bytes.Buffer
	for _, ev := range []collector.Event{exit, refused, inflight} {
		writeJSON(&buf, &ev)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []map[string]any{
		{"type": "exit", "time": "1970-01-01T00:00:01.000000005Z", "pid": 7.0, "exit_code": 0.0},
		{"type": "refused", "local": "10.251.0.2:9", "remote": "10.251.0.1:4000", "reason": 1.0},
		{"type": "conn_closed_inflight", "cause": "sigkill"},
	}
	for i, line := range lines {
		var got map[string]any
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatal(err)
		}
		for k, v := range want[i] {
			if got[k] != v {
				t.Errorf("line %d: %s = %v, want %v (%s)", i, k, got[k], v, line)
			}
		}
	}
}

func TestWriteTextAndSummary(t *testing.T) {
	var buf bytes.Buffer
	ev := collector.Event{Type: collector.EventSignal, Signal: 15, PID: 3, TargetInit: true}
	writeText(&buf, &ev)
	if !strings.Contains(buf.String(), "signal") || !strings.Contains(buf.String(), "sig=15 pid=3") {
		t.Fatalf("text: %q", buf.String())
	}
	buf.Reset()
	printSummary(&buf, kernel.Stats{Events: map[collector.EventType]uint64{collector.EventRefused: 4}, Dropped: 2}, nil)
	if !strings.Contains(buf.String(), "refused                4") || !strings.Contains(buf.String(), "lost                   2") {
		t.Fatalf("summary: %q", buf.String())
	}
}

func TestDispatch(t *testing.T) {
	var out, errb bytes.Buffer
	if dispatch([]string{"version"}, &out, &errb) != 0 || !strings.HasPrefix(out.String(), "drainwatch ") {
		t.Fatalf("version: %q", out.String())
	}
	if dispatch([]string{"nope"}, &out, &errb) != 2 || !strings.Contains(errb.String(), "unknown command") {
		t.Fatalf("unknown: %q", errb.String())
	}
}
