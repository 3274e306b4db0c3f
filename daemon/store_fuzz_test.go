package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"
)

// FuzzStateFile: whatever bytes the state file holds, a start opens a
// usable store (the file's own, or a new one with the file moved aside)
// and never panics or crashes.
func FuzzStateFile(f *testing.F) {
	dir := f.TempDir()
	path := storeWith(f, dir, 3)
	valid, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add(valid[:8192])
	f.Add([]byte("not a bbolt file"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		must(t, os.WriteFile(filepath.Join(dir, storeFile), data, 0o600))
		st, err := openState(dir, zerolog.Nop(), newStateMetrics(prometheus.NewRegistry()), startNow)
		if err != nil {
			t.Fatalf("start on %d bytes: %v", len(data), err)
		}
		defer st.store.Close()
		must(t, st.store.SaveCheckpoint(Checkpoint{Alive: startNow}, nil))
	})
}

// FuzzCheckpointDecoding: a readable file whose checkpoint values do not
// decode (another version's JSON, bit rot inside a value) is moved aside
// as corrupt, or restored: never a failed start.
func FuzzCheckpointDecoding(f *testing.F) {
	f.Add([]byte(`{"terminations":[],"kernel_watermark":{}}`), []byte(`[]`), []byte(`{"version":1}`), []byte(`{}`))
	f.Add([]byte(`{`), []byte(`null`), []byte(`"x"`), []byte(`{"pod_uid":1}`))
	f.Add([]byte(`{"terminations":[{"pod_uid":"u","marks":{"stop_signal":"not a time"}}]}`), []byte(`[{"netns":-1}]`), []byte(`{"version":99}`), []byte(`[]`))
	f.Fuzz(func(t *testing.T, correlator, scopes, counters, completed []byte) {
		dir := t.TempDir()
		saveRun(t, dir, nil, startNow)
		db, err := bolt.Open(filepath.Join(dir, storeFile), 0o600, nil)
		must(t, err)
		must(t, db.Update(func(tx *bolt.Tx) error {
			meta := tx.Bucket(bucketMeta)
			return errors.Join(meta.Put(keyCorrelator, correlator), meta.Put(keyScopes, scopes),
				tx.Bucket(bucketMetrics).Put(keyCounters, counters), tx.Bucket(bucketTerminations).Put([]byte("uid"), completed))
		}))
		must(t, db.Close())
		st, err := openState(dir, zerolog.Nop(), newStateMetrics(prometheus.NewRegistry()), startNow)
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		must(t, st.store.Close())
	})
}
