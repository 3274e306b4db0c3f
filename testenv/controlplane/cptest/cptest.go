// Package cptest shares one control plane among the tests of a package:
// starting one takes seconds, so TestMain starts it once and every test takes
// it with Get.
//
//	func TestMain(m *testing.M) { cptest.Main(m) }
package cptest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

var (
	shared    *controlplane.ControlPlane
	sharedErr error
)

// Main starts the control plane (when its binaries exist and the run is not
// -short), runs the tests, stops it and exits. Its logs are kept when a test failed.
func Main(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// make test-unit: no control plane; Get skips.
	} else if _, err := controlplane.BinDir(); err != nil {
		sharedErr = err
	} else {
		log := zerolog.New(zerolog.NewConsoleWriter(func(w *zerolog.ConsoleWriter) { w.Out = os.Stderr })).
			Level(zerolog.InfoLevel).With().Timestamp().Logger()
		shared, sharedErr = controlplane.Start(context.Background(), controlplane.Config{Log: log})
	}
	code := m.Run()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping control plane:", err)
		}
		if code == 0 {
			os.RemoveAll(shared.Dir)
		} else {
			// Keep the logs, not etcd's 120 MB of preallocated WAL.
			os.RemoveAll(filepath.Join(shared.Dir, "etcd"))
			fmt.Fprintln(os.Stderr, "control-plane logs kept in", shared.Dir)
		}
	}
	os.Exit(code)
}

// Get returns the shared control plane. Missing binaries skip the test outside
// CI and fail it in CI; a failed start fails it.
func Get(t testing.TB) *controlplane.ControlPlane {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no control plane")
	}
	if _, err := controlplane.BinDir(); err != nil {
		if privileged.InCI() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if sharedErr != nil {
		t.Fatalf("starting control plane: %v", sharedErr)
	}
	return shared
}
