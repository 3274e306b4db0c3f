package collector

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestWriteTraceJSON(t *testing.T) {
	exit := Event{Type: EventExit, Time: time.Unix(1, 5), PID: 7, ExitCode: 0}
	refused := Event{Type: EventRefused, Reason: 1,
		Local: netip.MustParseAddrPort("10.251.0.2:9"), Remote: netip.MustParseAddrPort("10.251.0.1:4000")}
	inflight := Event{Type: EventConnClosedInflight, Cause: CauseSigkill}
	var buf bytes.Buffer
	for _, ev := range []Event{exit, refused, inflight} {
		WriteTraceJSON(&buf, &ev)
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

func TestWriteTraceText(t *testing.T) {
	var buf bytes.Buffer
	ev := Event{Type: EventSignal, Signal: 15, PID: 3, TargetInit: true}
	WriteTraceText(&buf, &ev)
	if !strings.Contains(buf.String(), "signal") || !strings.Contains(buf.String(), "sig=15 pid=3") {
		t.Fatalf("text: %q", buf.String())
	}
}

// A command name is any process's to choose: its escape sequence or
// newline reaches the terminal escaped, on the event's one line.
func TestWriteTraceTextEscapesComm(t *testing.T) {
	var buf bytes.Buffer
	ev := Event{Type: EventExit, PID: 3}
	copy(ev.Comm[:], "\x1b]0;x\x07\nfake")
	WriteTraceText(&buf, &ev)
	out := buf.String()
	if !strings.HasSuffix(out, ` comm=\x1b]0;x\a\nfake code=0 sig=0 init=false`+"\n") || strings.Count(out, "\n") != 1 {
		t.Fatalf("text: %q", out)
	}
}
