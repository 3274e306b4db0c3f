package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"github.com/drainwatch/drainwatch/correlate"
)

func startupAt(uid string, end time.Time, refusedAfter int) correlate.Startup {
	return correlate.Startup{PodUID: uid, Pod: "web-" + uid, Namespace: "shop", Complete: true,
		Marks:  correlate.StartupMarks{Ready: end.Add(-time.Minute), WindowEnd: end},
		Counts: correlate.StartupCounts{RefusedAfterReady: refusedAfter}}
}

// TestStoredStartups: complete startups saved with checkpoints are read
// back oldest first, at most keptStartups of them (the oldest go), and
// pruned by the end of their window like terminations.
func TestStoredStartups(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	must(t, err)
	var batch []correlate.Startup
	for i := range keptStartups + 5 {
		batch = append(batch, startupAt(fmt.Sprintf("u%04d", i), startNow.Add(-time.Hour+time.Duration(i)*time.Second), i%3))
		if len(batch) == 100 || i == keptStartups+4 {
			must(t, s.SaveCheckpoint(Checkpoint{Alive: startNow, Startups: batch}, nil))
			batch = nil
		}
	}
	must(t, s.Close())
	s, err = OpenStore(dir)
	must(t, err)
	defer s.Close()
	got, err := s.Startups()
	must(t, err)
	if len(got) != keptStartups || got[0].PodUID != "u0005" || got[len(got)-1].PodUID != fmt.Sprintf("u%04d", keptStartups+4) ||
		got[7].Counts.RefusedAfterReady != 12%3 {
		t.Fatalf("%d startups from %s to %s, want %d from u0005", len(got), got[0].PodUID, got[len(got)-1].PodUID, keptStartups)
	}
	n, err := s.PruneStartups(startNow.Add(-time.Hour + 1000*time.Second))
	must(t, err)
	if got, _ = s.Startups(); n != 995 || len(got) != keptStartups-995 || got[0].PodUID != "u1000" {
		t.Fatalf("pruned %d, %d left from %s, want 995 and u1000", n, len(got), got[0].PodUID)
	}
}

// TestDaemonRestoresStartups: a start serves the startups the last run
// completed; an invalid one is dropped, from the store too.
func TestDaemonRestoresStartups(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	must(t, err)
	good := []correlate.Startup{startupAt("a", startNow.Add(-2*time.Minute), 2), startupAt("b", startNow.Add(-time.Minute), 0)}
	must(t, s.SaveCheckpoint(Checkpoint{Alive: startNow.Add(-time.Second), Startups: good}, nil))
	must(t, s.Close())
	db, err := bolt.Open(dir+"/"+storeFile, 0o600, nil)
	must(t, err)
	bad, _ := json.Marshal(startupAt("c", startNow.Add(-time.Minute), -4))
	must(t, db.Update(func(tx *bolt.Tx) error {
		return errors.Join(tx.Bucket(bucketStartups).Put([]byte("c"), bad), tx.Bucket(bucketStartups).Put([]byte("d"), []byte("{not json")))
	}))
	must(t, db.Close())

	st, err := openState(dir, zerolog.New(io.Discard), newStateMetrics(prometheus.NewRegistry()), startNow)
	must(t, err)
	if len(st.completed) != 0 || len(st.startups) != 2 || st.startups[0].PodUID != "a" || st.startups[0].Counts.RefusedAfterReady != 2 || st.startups[1].PodUID != "b" {
		t.Errorf("restored startups %+v, want a then b", st.startups)
	}
	stored, err := st.store.Startups()
	must(t, err)
	n, err := countKeys(st.store, bucketStartups)
	must(t, err)
	must(t, st.store.Close())
	if len(stored) != 2 || n != 2 {
		t.Errorf("%d startups still stored (%d keys), want the invalid and the undecodable one deleted", len(stored), n)
	}
	var v startupView
	v.restore(st.startups)
	if got := v.Startups(); len(got) != 2 || got[1].PodUID != "b" {
		t.Errorf("served %+v, want a and b", got)
	}
}

func countKeys(s *Store, bucket []byte) (int, error) {
	n := 0
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(_, _ []byte) error { n++; return nil })
	})
	return n, err
}
