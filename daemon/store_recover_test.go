package daemon

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"github.com/drainwatch/drainwatch/correlate"
)

// startNow is the time of the start that finds the file unreadable.
var startNow = time.Date(2026, 11, 30, 9, 45, 1, 0, time.UTC)

// storeWith writes a store of n complete terminations (several pages).
func storeWith(t testing.TB, dir string, n int) string {
	t.Helper()
	var ts []correlate.Termination
	for i := range n {
		ts = append(ts, completedAt(strings.Repeat("u", 200)+string(rune('a'+i%26))+string(rune('a'+i/26)), startNow.Add(-time.Hour), correlate.Counts{RefusedAfterSigterm: 3}, "refused"))
	}
	saveRun(t, dir, nil, startNow.Add(-time.Minute), ts...)
	return filepath.Join(dir, storeFile)
}

// TestUnreadableStateFileIsMovedAside: a truncated, corrupt or future
// state file is renamed aside with the reason and the start's time, logged
// and counted once, and the daemon starts afresh on a new store; the next
// start finds that store readable.
func TestUnreadableStateFileIsMovedAside(t *testing.T) {
	cases := map[string]struct {
		reason string
		damage func(t *testing.T, path string)
	}{
		"truncated to half": {resetTruncated, func(t *testing.T, path string) {
			fi, err := os.Stat(path)
			must(t, err)
			must(t, os.Truncate(path, fi.Size()/2))
		}},
		"truncated to 100 bytes": {resetTruncated, func(t *testing.T, path string) { must(t, os.Truncate(path, 100)) }},
		"garbage bytes": {resetCorrupt, func(t *testing.T, path string) {
			must(t, os.WriteFile(path, bytes.Repeat([]byte("drainwatch"), 4000), 0o600))
		}},
		"corrupt data pages": {resetCorrupt, func(t *testing.T, path string) {
			data, err := os.ReadFile(path)
			must(t, err)
			// Every page after the two meta pages: the freelist, the
			// buckets and their leaves.
			for i := 2 * 4096; i < len(data); i++ {
				data[i] = byte(i * 7)
			}
			must(t, os.WriteFile(path, data, 0o600))
		}},
		"future version": {resetFutureVersion, func(t *testing.T, path string) {
			db, err := bolt.Open(path, 0o600, nil)
			must(t, err)
			must(t, db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket(bucketMeta).Put(keyVersion, binary.BigEndian.AppendUint64(nil, storeVersion+1))
			}))
			must(t, db.Close())
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := storeWith(t, dir, 60)
			c.damage(t, path)
			var logs bytes.Buffer
			m := newStateMetrics(prometheus.NewRegistry())
			st, err := openState(dir, zerolog.New(&logs), m, startNow)
			must(t, err)
			if st.restored || len(st.completed) != 0 {
				t.Errorf("restored %v with %d terminations from a reset store", st.restored, len(st.completed))
			}
			must(t, st.store.Close())
			aside := path + "." + c.reason + "-20261130T094501Z"
			if _, err := os.Stat(aside); err != nil {
				t.Errorf("not moved aside to %s: %v", aside, err)
			}
			if got := testutil.ToFloat64(m.resets.WithLabelValues(c.reason)); got != 1 {
				t.Errorf("drainwatch_state_file_reset_total{reason=%q} = %v, want 1", c.reason, got)
			}
			if !strings.Contains(logs.String(), `"reason":"`+c.reason+`"`) || !strings.Contains(logs.String(), "moved aside, starting afresh") {
				t.Errorf("log: %s", logs.String())
			}
			st, err = openState(dir, zerolog.Nop(), m, startNow.Add(time.Minute))
			must(t, err)
			must(t, st.store.Close())
			if got := testutil.CollectAndCount(m.resets); got != 1 {
				t.Errorf("%d reset series after a second start, want 1", got)
			}
		})
	}
}

// TestReadableStateFileIsKept: a store written by this version opens with
// its terminations and nothing is moved.
func TestReadableStateFileIsKept(t *testing.T) {
	dir := t.TempDir()
	storeWith(t, dir, 60)
	m := newStateMetrics(prometheus.NewRegistry())
	st, err := openState(dir, zerolog.Nop(), m, startNow)
	must(t, err)
	defer st.store.Close()
	entries, err := os.ReadDir(dir)
	must(t, err)
	if !st.restored || len(st.completed) != 60 || len(entries) != 1 || testutil.CollectAndCount(m.resets) != 0 {
		t.Errorf("restored %v, %d terminations, %d files, %d resets", st.restored, len(st.completed), len(entries),
			testutil.CollectAndCount(m.resets))
	}
}
