package daemon

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/collector/kernel"
	"github.com/drainwatch/drainwatch/collector/node"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// idleKernel is a kernel side that delivers nothing.
type idleKernel struct{}

func (idleKernel) WatchNetns(uint32) error               { return nil }
func (idleKernel) UnwatchNetns(uint32) error             { return nil }
func (idleKernel) WatchCgroup(uint64) error              { return nil }
func (idleKernel) ProcessNetns() (map[int]uint32, error) { return map[int]uint32{}, nil }
func (idleKernel) UnwatchCgroup(uint64) error            { return nil }
func (idleKernel) WatchAddr(netip.Addr) error            { return nil }
func (idleKernel) UnwatchAddr(netip.Addr) error          { return nil }
func (idleKernel) BlackholeAddr(netip.Addr) error        { return nil }
func (idleKernel) Events() <-chan collector.Event        { return nil }
func (idleKernel) Stats() (kernel.Stats, error)          { return kernel.Stats{}, nil }
func (idleKernel) Probes() []kernel.ProbeStatus          { return nil }
func (idleKernel) Close() error                          { return nil }
func (idleKernel) SetDetail(uint32, bool) error          { return nil }
func (idleKernel) SetProbeComms([]string) error          { return nil }
func (idleKernel) ScopeAccepts(uint32) (collector.AcceptSummary, error) {
	return collector.AcceptSummary{}, nil
}

// smallDisk mounts a 256 KiB tmpfs on a new directory for the test.
func smallDisk(t *testing.T) string {
	t.Helper()
	privileged.RequireRoot(t)
	dir := t.TempDir()
	must(t, unix.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"))
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file until the disk is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	must(t, err)
	defer f.Close()
	_, err = io.Copy(f, io.LimitReader(zeros{}, 1<<20))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling %s: %v, want ENOSPC", dir, err)
	}
	return path
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestFullDiskDegradesCheckpoints: on a full disk under the state dir a
// checkpoint fails, is logged and counted, the loop goes on and keeps the
// terminations it could not save; once space is back the next checkpoint
// saves them all, and the metrics counted them meanwhile.
func TestFullDiskDegradesCheckpoints(t *testing.T) {
	dir := smallDisk(t)
	var logs bytes.Buffer
	d, err := New(Config{NodeName: "full", StateDir: dir, CgroupRoot: t.TempDir(), ProcRoot: t.TempDir(),
		Log: zerolog.New(&logs), Now: func() time.Time { return startNow }})
	must(t, err)
	st, err := openState(dir, d.log, d.state, startNow)
	must(t, err)
	d.store, d.kernel = st.store, idleKernel{}
	defer d.store.Close()
	d.scopes = node.NewScopes(d.kernel, d.corr, d.cfg.CgroupRoot, d.cfg.ProcRoot, d.log)
	d.periodicCheckpoint()
	filler := fill(t, dir)
	for i := range 60 {
		d.finished(completedAt(strings.Repeat("x", 300)+string(rune('a'+i%26))+string(rune('a'+i/26)), startNow,
			correlate.Counts{RefusedAfterSigterm: 2}, "refused"))
	}
	d.periodicCheckpoint()
	if got := testutil.ToFloat64(d.state.failures); got != 1 || len(d.completed) != 60 {
		t.Fatalf("after a checkpoint on a full disk: %v failures, %d terminations kept; want 1, 60", got, len(d.completed))
	}
	if !strings.Contains(logs.String(), "checkpoint failed (counting goes on") || !strings.Contains(logs.String(), "no space left on device") {
		t.Errorf("log: %s", logs.String())
	}
	wantRefused := `
# HELP drainwatch_connections_refused_after_sigterm_total Connection attempts answered with a RST (no socket: ECONNREFUSED at the client) from the stop signal until the pod's network namespace was gone.
# TYPE drainwatch_connections_refused_after_sigterm_total counter
drainwatch_connections_refused_after_sigterm_total{namespace="shop",revision="7",workload="web",workload_kind="Deployment"} 120
`
	must(t, testutil.GatherAndCompare(d.metrics.Registry(), strings.NewReader(wantRefused), "drainwatch_connections_refused_after_sigterm_total"))

	must(t, os.Remove(filler))
	d.periodicCheckpoint()
	stored, err := d.store.Completed()
	must(t, err)
	if got := testutil.ToFloat64(d.state.failures); got != 1 || len(d.completed) != 0 || len(stored) != 60 {
		t.Errorf("once space is back: %v failures, %d kept, %d stored; want 1, 0, 60", got, len(d.completed), len(stored))
	}
}
