package main

import (
	"strings"
	"testing"
)

// TestTraceChecksNetnsBeforeAttaching: a wrong --netns is the only line on
// stderr; loading the programs would log first (and need privileges).
func TestTraceChecksNetnsBeforeAttaching(t *testing.T) {
	var out, errOut strings.Builder
	code := traceCmd([]string{"--netns", "/bad"}, &out, &errOut)
	want := "drainwatch trace: --netns: network namespace /bad: no such file or directory\n"
	if code != 2 || errOut.String() != want || out.Len() != 0 {
		t.Errorf("exit %d, stderr %q; want 2, %q", code, errOut.String(), want)
	}
}
