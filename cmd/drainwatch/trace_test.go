package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
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

func TestDispatch(t *testing.T) {
	var out, errb bytes.Buffer
	if dispatch([]string{"version"}, &out, &errb) != 0 || !strings.HasPrefix(out.String(), "drainwatch ") {
		t.Fatalf("version: %q", out.String())
	}
	if dispatch([]string{"nope"}, &out, &errb) != 2 || !strings.Contains(errb.String(), "unknown command") {
		t.Fatalf("unknown: %q", errb.String())
	}
}
