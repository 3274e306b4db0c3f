package daemon

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/drainwatch/drainwatch/collector/node"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

// storeFile is the bbolt database under the state dir.
const storeFile = "drainwatch.db"

var (
	bucketMeta         = []byte("meta")
	bucketTerminations = []byte("terminations")
	bucketMetrics      = []byte("metrics")
	bucketStartups     = []byte("startups")
	keyCorrelator      = []byte("correlator")
	keyScopes          = []byte("scopes")
	keyAlive           = []byte("alive")
	keyClean           = []byte("clean")
	keyKernelLost      = []byte("kernel_lost")
	keyCounters        = []byte("counters")
	keyVersion         = []byte("version")
)

// storeVersion is the layout of the store this drainwatch writes. A store
// of a higher version (a downgrade) is moved aside at start, never read.
// Raise it when a change is not readable by the previous release.
const storeVersion = 1

// Store persists what a restart must not lose: the correlator's state (the
// terminations in progress, with their kernel watermark), the watched
// scopes, the complete terminations (kept past the correlator's retention
// for the API), the metrics' cumulative counters (so no _total decreases)
// and the last time the daemon was alive (the start of the gap a restart
// leaves).
type Store struct {
	db *bolt.DB
}

// OpenStore opens (creating) the store in dir.
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating state dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, storeFile)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("opening state store %s (is another drainwatch running on this state dir?): %w", path, err)
	}
	if err := initStore(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("initialising state store %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// initStore creates the buckets and stamps the version, refusing a store
// of a later version.
func initStore(db *bolt.DB) error {
	return db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketTerminations, bucketMetrics, bucketStartups} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		// A store without a version is of version 1 (written before
		// stores carried one).
		if v := meta.Get(keyVersion); len(v) == 8 && binary.BigEndian.Uint64(v) > storeVersion {
			return fmt.Errorf("%w (version %d, this one reads up to %d)", errFutureVersion, binary.BigEndian.Uint64(v), storeVersion)
		}
		return meta.Put(keyVersion, binary.BigEndian.AppendUint64(nil, storeVersion))
	})
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Checkpoint is the state saved periodically and at shutdown, in one
// transaction so a crash never leaves them out of step.
type Checkpoint struct {
	Correlator correlate.State
	Scopes     []node.ScopeRecord
	Alive      time.Time
	// Clean is set by the checkpoint of an orderly shutdown: every kernel
	// event read from the ring buffer was counted and saved.
	Clean bool
	// KernelLost is the kernel's count of ring-buffer reserve failures
	// that Counters include (as of the last read before the checkpoint):
	// what a resumed kernel side counts beyond it was lost after, while
	// the daemon was down.
	KernelLost uint64
	// Counters are the metrics' live series, saved in step with the
	// terminations counted into them (nil leaves the stored ones as they
	// are).
	Counters *exporter.CounterState
	// Startups are the new pods' startups completed since the last
	// checkpoint (counted into Counters), kept for the API like the
	// complete terminations; LoadCheckpoint leaves it empty (Startups
	// reads them).
	Startups []correlate.Startup
	// Export marks the checkpoint's terminations and startups pending for
	// the OTLP exporter (--otlp-endpoint).
	Export bool
}

// SaveCheckpoint writes a checkpoint and the terminations completed since
// the last one.
func (s *Store) SaveCheckpoint(cp Checkpoint, completed []correlate.Termination) error {
	state, err := json.Marshal(cp.Correlator)
	if err != nil {
		return fmt.Errorf("encoding correlator state: %w", err)
	}
	scopes, err := json.Marshal(cp.Scopes)
	if err != nil {
		return fmt.Errorf("encoding watched scopes: %w", err)
	}
	alive, _ := cp.Alive.MarshalBinary()
	err = s.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		clean := []byte{0}
		if cp.Clean {
			clean[0] = 1
		}
		lost := binary.BigEndian.AppendUint64(nil, cp.KernelLost)
		if err := errors.Join(meta.Put(keyCorrelator, state), meta.Put(keyScopes, scopes), meta.Put(keyAlive, alive),
			meta.Put(keyClean, clean), meta.Put(keyKernelLost, lost)); err != nil {
			return err
		}
		if err := putCounters(tx.Bucket(bucketMetrics), cp.Counters); err != nil {
			return err
		}
		if err := putStartups(tx.Bucket(bucketStartups), cp.Startups); err != nil {
			return err
		}
		if err := putTerminations(tx.Bucket(bucketTerminations), completed); err != nil {
			return err
		}
		if !cp.Export {
			return nil
		}
		return putOTLPPending(tx, completed, cp.Startups)
	})
	if err != nil {
		return fmt.Errorf("saving checkpoint: %w", err)
	}
	return nil
}

// putCounters stores the metrics' series as JSON (metrics/counters); the
// state carries its format version.
func putCounters(b *bolt.Bucket, cs *exporter.CounterState) error {
	if cs == nil {
		return nil
	}
	v, err := json.Marshal(cs)
	if err != nil {
		return fmt.Errorf("encoding metric counters: %w", err)
	}
	return b.Put(keyCounters, v)
}

// getCounters reads the stored series; a store written before they were
// saved has none (cp.Counters stays nil).
func getCounters(b *bolt.Bucket, cp *Checkpoint) error {
	v := b.Get(keyCounters)
	if v == nil {
		return nil
	}
	cp.Counters = new(exporter.CounterState)
	if err := json.Unmarshal(v, cp.Counters); err != nil {
		return fmt.Errorf("decoding metric counters: %w", err)
	}
	return nil
}

func putTerminations(b *bolt.Bucket, ts []correlate.Termination) error {
	for _, t := range ts {
		v, err := json.Marshal(t)
		if err != nil {
			return fmt.Errorf("encoding termination of %s: %w", t.Pod, err)
		}
		if err := b.Put([]byte(t.Key()), v); err != nil {
			return err
		}
	}
	return nil
}

// putStartups stores complete startups by pod UID (a pod starts once) and
// keeps the most recent keptStartups, by the end of their window.
func putStartups(b *bolt.Bucket, ss []correlate.Startup) error {
	if len(ss) == 0 {
		return nil
	}
	for _, st := range ss {
		v, err := json.Marshal(st)
		if err != nil {
			return fmt.Errorf("encoding the startup of %s: %w", st.Pod, err)
		}
		if err := b.Put([]byte(st.PodUID), v); err != nil {
			return err
		}
	}
	n, c := 0, b.Cursor()
	for k, _ := c.First(); k != nil && n <= keptStartups; k, _ = c.Next() {
		n++
	}
	if n <= keptStartups {
		return nil
	}
	type aged struct {
		key []byte
		end time.Time
	}
	var all []aged
	err := b.ForEach(func(k, v []byte) error {
		var st struct {
			Marks correlate.StartupMarks `json:"marks"`
		}
		_ = json.Unmarshal(v, &st) // undecodable: the zero time, the oldest
		all = append(all, aged{append([]byte(nil), k...), st.Marks.WindowEnd})
		return nil
	})
	slices.SortFunc(all, func(a, b aged) int { return a.end.Compare(b.end) })
	for _, a := range all[:max(len(all)-keptStartups, 0)] {
		err = errors.Join(err, b.Delete(a.key))
	}
	return err
}

// Startups returns the complete startups stored, oldest window first.
func (s *Store) Startups() ([]correlate.Startup, error) {
	out, _, err := s.readStartups()
	return out, err
}

// readStartups also returns the keys of the records it could not decode:
// a start drops those (dropInvalid) instead of setting the whole file
// aside for one of them.
func (s *Store) readStartups() (out []correlate.Startup, undecodable [][]byte, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketStartups)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var st correlate.Startup
			if json.Unmarshal(v, &st) != nil {
				undecodable = append(undecodable, append([]byte(nil), k...))
				return nil
			}
			out = append(out, st)
			return nil
		})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("reading stored startups: %w", err)
	}
	slices.SortStableFunc(out, func(a, b correlate.Startup) int { return a.Marks.WindowEnd.Compare(b.Marks.WindowEnd) })
	return out, undecodable, nil
}

// PruneStartups deletes complete startups whose window ended before
// cutoff, or that cannot be read.
func (s *Store) PruneStartups(cutoff time.Time) (int, error) {
	return s.prune(bucketStartups, func(v []byte) bool {
		var st struct {
			Marks correlate.StartupMarks `json:"marks"`
		}
		return json.Unmarshal(v, &st) != nil || st.Marks.WindowEnd.Before(cutoff)
	})
}

// LoadCheckpoint reads the last checkpoint; ok is false on a first start.
func (s *Store) LoadCheckpoint() (cp Checkpoint, ok bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		state := meta.Get(keyCorrelator)
		if state == nil {
			return nil
		}
		ok = true
		if err := json.Unmarshal(state, &cp.Correlator); err != nil {
			return fmt.Errorf("decoding correlator state: %w", err)
		}
		if v := meta.Get(keyScopes); v != nil {
			if err := json.Unmarshal(v, &cp.Scopes); err != nil {
				return fmt.Errorf("decoding watched scopes: %w", err)
			}
		}
		if v := meta.Get(keyClean); len(v) == 1 {
			cp.Clean = v[0] == 1
		}
		if v := meta.Get(keyKernelLost); len(v) == 8 {
			cp.KernelLost = binary.BigEndian.Uint64(v)
		}
		if err := getCounters(tx.Bucket(bucketMetrics), &cp); err != nil {
			return err
		}
		return cp.Alive.UnmarshalBinary(meta.Get(keyAlive))
	})
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("loading checkpoint (move the state dir away to start afresh): %w", err)
	}
	return cp, ok, nil
}

// Completed returns the complete terminations stored, any order.
func (s *Store) Completed() ([]correlate.Termination, error) {
	var out []correlate.Termination
	err := s.EachCompleted(nil, func(t correlate.Termination) error {
		out = append(out, t)
		return nil
	})
	return out, err
}

// EachCompleted calls fn with each complete termination stored, any order,
// decoding one at a time (the API filters them without holding them all)
// and none whose key (Termination.Key) skip, if not nil, says to skip.
// It is safe while checkpoints are written.
func (s *Store) EachCompleted(skip func(key []byte) bool, fn func(correlate.Termination) error) error {
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTerminations).ForEach(func(k, v []byte) error {
			if skip != nil && skip(k) {
				return nil
			}
			var t correlate.Termination
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("decoding the termination of pod uid %s: %w", k, err)
			}
			return fn(t)
		})
	})
	if err != nil {
		return fmt.Errorf("reading stored terminations: %w", err)
	}
	return nil
}

// Termination returns the stored complete termination of a pod.
func (s *Store) Termination(uid string) (t correlate.Termination, ok bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketTerminations).Get([]byte(uid))
		if v == nil {
			return nil
		}
		ok = true
		return json.Unmarshal(v, &t)
	})
	if err != nil {
		return correlate.Termination{}, false, fmt.Errorf("reading the stored termination of pod uid %s: %w", uid, err)
	}
	return t, ok, nil
}

// Prune deletes complete terminations whose last mark is before cutoff.
func (s *Store) Prune(cutoff time.Time, lastMark func(correlate.Marks) time.Time) (int, error) {
	return s.prune(bucketTerminations, func(v []byte) bool {
		// Only the marks are decoded: the rest of a termination (its
		// connections, sources, diagnoses) is not needed here.
		var t struct {
			Marks correlate.Marks `json:"marks"`
		}
		return json.Unmarshal(v, &t) != nil || lastMark(t.Marks).Before(cutoff)
	})
}

// prune deletes the records of bucket that stale says are, and returns
// how many.
func (s *Store) prune(bucket []byte, stale func(v []byte) bool) (int, error) {
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		var keys [][]byte
		err := b.ForEach(func(k, v []byte) error {
			if stale(v) {
				keys = append(keys, append([]byte(nil), k...))
			}
			return nil
		})
		for _, k := range keys {
			err = errors.Join(err, b.Delete(k))
		}
		n = len(keys)
		return err
	})
	return n, err
}
