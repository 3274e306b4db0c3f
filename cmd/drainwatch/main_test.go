package main

import (
	"os"
	"testing"
)

// TestMain lets tests run the real command as a subprocess: the test binary
// re-executes itself as drainwatch when DRAINWATCH_TEST_MAIN=1 (no go build
// in tests, the same signals and exit codes as the real binary).
func TestMain(m *testing.M) {
	if os.Getenv("DRAINWATCH_TEST_MAIN") == "1" {
		os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
