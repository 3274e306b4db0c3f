package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
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

// plantState writes a store of two good terminations, then the given
// correlator state and one more termination as raw JSON.
func plantState(t testing.TB, dir string, correlator, termination []byte) {
	t.Helper()
	good := []correlate.Termination{
		completedAt("good-1", startNow.Add(-time.Hour), correlate.Counts{RefusedAfterSigterm: 3}, "refused"),
		completedAt("good-2", startNow.Add(-time.Hour), correlate.Counts{}, "clean"),
	}
	saveRun(t, dir, nil, startNow.Add(-time.Minute), good...)
	db, err := bolt.Open(filepath.Join(dir, storeFile), 0o600, nil)
	must(t, err)
	must(t, db.Update(func(tx *bolt.Tx) error {
		return errors.Join(tx.Bucket(bucketMeta).Put(keyCorrelator, correlator),
			tx.Bucket(bucketTerminations).Put([]byte("planted"), termination))
	}))
	must(t, db.Close())
}

// TestInvalidStateIsDroppedNotFatal: a readable file holding a correlator
// state with a ring index out of range and a termination with a negative
// count starts: a copy set aside, one log line and count, those parts
// dropped (from the store too), the good terminations restored.
func TestInvalidStateIsDroppedNotFatal(t *testing.T) {
	dir := t.TempDir()
	badTerm, _ := json.Marshal(completedAt("planted", startNow.Add(-time.Hour), correlate.Counts{RefusedAfterSigterm: -7}, "refused"))
	plantState(t, dir, []byte(`{"pods":{"u":{"pod":{"uid":"u"},"accepts":{"t":[1,2],"next":9}}}}`), badTerm)
	var logs bytes.Buffer
	m := newStateMetrics(prometheus.NewRegistry())
	st, err := openState(dir, zerolog.New(&logs), m, startNow)
	must(t, err)
	defer st.store.Close()
	if st.restored || len(st.completed) != 2 {
		t.Errorf("restored %v with %d terminations, want the checkpoint dropped and the 2 good ones", st.restored, len(st.completed))
	}
	if _, ok, _ := st.store.Termination("planted"); ok {
		t.Error("the invalid termination is still in the store")
	}
	aside := filepath.Join(dir, storeFile) + ".invalid-20261130T094501Z"
	if _, err := os.Stat(aside); err != nil {
		t.Errorf("no copy set aside: %v", err)
	}
	if got := testutil.ToFloat64(m.resets.WithLabelValues(resetInvalid)); got != 1 {
		t.Errorf("drainwatch_state_file_reset_total{reason=invalid} = %v, want 1", got)
	}
	log := logs.String()
	if strings.Count(log, "\n") != 1 || !strings.Contains(log, "those parts dropped, the rest restored") ||
		!strings.Contains(log, "ring") || !strings.Contains(log, "RefusedAfterSigterm is negative") {
		t.Errorf("log: %s", log)
	}
}

// FuzzRestoredState: whatever correlator state and termination a readable
// file holds, a start neither fails nor panics, what it restores passes
// its checks, and a correlator restored from it runs.
func FuzzRestoredState(f *testing.F) {
	good := correlate.New(correlate.Config{})
	snap, _ := good.Snapshot()
	state, _ := json.Marshal(snap)
	term, _ := json.Marshal(completedAt("planted", startNow.Add(-time.Hour), correlate.Counts{RefusedAfterSigterm: 2}, "refused"))
	f.Add(state, term)
	f.Add([]byte(`{"pods":{"u":{"pod":{"uid":"u"},"accepts":{"t":[1,2],"next":9},"early":{"next":-1}}}}`), []byte(`{"pod_uid":"x","counts":{"refused_after_sigterm":-1}}`))
	f.Add([]byte(`{"pods":{"u":null},"kernel_watermark":{"at":"9999-01-01T00:00:00Z"}}`), []byte(`{"pod_uid":"y","marks":{"exit":"1900-01-01T00:00:00Z"}}`))
	f.Add([]byte(`{"pods":{"u":{"pod":{"uid":"u"},"term":{"t":{"pod_uid":"u","counts":{"requests_killed_at_exit":-3}}}}}}`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, correlator, termination []byte) {
		dir := t.TempDir()
		plantState(t, dir, correlator, termination)
		st, err := openState(dir, zerolog.Nop(), newStateMetrics(prometheus.NewRegistry()), startNow)
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		defer st.store.Close()
		if st.restored {
			if err := checkCheckpoint(st.cp, startNow); err != nil {
				t.Fatalf("restored an invalid checkpoint: %v", err)
			}
			c := correlate.New(correlate.Config{})
			if err := c.Restore(st.cp.Correlator); err != nil {
				t.Fatalf("restore: %v", err)
			}
			c.Tick(startNow)
			c.Tick(startNow.Add(time.Hour))
		}
		for _, tm := range st.completed {
			if err := correlate.CheckTermination(tm, startNow); err != nil {
				t.Fatalf("restored an invalid termination: %v", err)
			}
		}
		if bad, _ := st.store.invalidCompleted(startNow); len(bad) > 0 {
			t.Fatalf("%d invalid terminations left in the store", len(bad))
		}
	})
}
