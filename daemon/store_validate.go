package daemon

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

// resetInvalid: the file was readable, but parts of what it held fail
// their semantic checks (a time years ahead, a negative count, a ring
// index out of range): those parts are dropped, the rest restored.
const resetInvalid = "invalid"

// maxRestoredScopes bounds the watched scopes a checkpoint may hold.
const maxRestoredScopes = 1 << 14

// dropInvalid checks what a start read and drops each part that fails:
// the checkpoint (correlator state, scopes and alive stamp, saved
// together), the metric counters, each complete termination. It changes
// only what was read; the keys of the terminations to delete from the
// store (so the API never serves them) are returned. The error says what
// was dropped and why; nil when everything holds.
func (st *restoredState) dropInvalid(now time.Time) (bad [][]byte, err error) {
	var errs []error
	if st.restored {
		if err := checkCheckpoint(st.cp, now); err != nil {
			st.cp, st.restored = Checkpoint{Counters: st.cp.Counters}, false
			errs = append(errs, fmt.Errorf("checkpoint dropped (terminations in progress are lost): %w", err))
		}
	}
	if cs := st.cp.Counters; cs != nil {
		if err := checkCounters(*cs, now); err != nil {
			st.cp.Counters = nil
			errs = append(errs, fmt.Errorf("metric counters dropped (rebuilt from the stored terminations): %w", err))
		}
	}
	st.completed = slices.DeleteFunc(st.completed, func(t correlate.Termination) bool {
		return correlate.CheckTermination(t, now) != nil
	})
	if len(st.badStartups) > 0 {
		errs = append(errs, fmt.Errorf("%d stored startups dropped: not decodable", len(st.badStartups)))
	}
	st.startups = slices.DeleteFunc(st.startups, func(s correlate.Startup) bool {
		if err := correlate.CheckStartup(s, now); err != nil {
			st.badStartups = append(st.badStartups, []byte(s.PodUID))
			errs = append(errs, fmt.Errorf("the startup of pod uid %s dropped: %w", s.PodUID, err))
			return true
		}
		return false
	})
	bad, err = st.store.invalidCompleted(now)
	if len(bad) > 0 {
		errs = append(errs, fmt.Errorf("%d complete terminations dropped: %w", len(bad), err))
	}
	return bad, errors.Join(errs...)
}

// invalidCompleted lists the keys of the stored terminations that fail
// correlate.CheckTermination, and the first one's error.
func (s *Store) invalidCompleted(now time.Time) (keys [][]byte, first error) {
	_ = s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTerminations).ForEach(func(k, v []byte) error {
			var t correlate.Termination
			err := json.Unmarshal(v, &t)
			if err == nil {
				err = correlate.CheckTermination(t, now)
			}
			if err != nil {
				keys, first = append(keys, append([]byte(nil), k...)), cmp.Or(first, err)
			}
			return nil
		})
	})
	return keys, first
}

func checkCheckpoint(cp Checkpoint, now time.Time) error {
	if !cp.Alive.IsZero() && (cp.Alive.Before(time.Unix(0, 0)) || cp.Alive.After(now.Add(24*time.Hour))) {
		return fmt.Errorf("alive stamp %s", cp.Alive)
	}
	if len(cp.Scopes) > maxRestoredScopes {
		return fmt.Errorf("%d watched scopes", len(cp.Scopes))
	}
	for _, r := range cp.Scopes {
		if r.PodUID == "" {
			return errors.New("a watched scope without a pod uid")
		}
	}
	return cp.Correlator.Check(now)
}

// checkCounters: label values valid and bounded (a scrape fails on one
// that is not UTF-8), sums finite, times sane.
func checkCounters(cs exporter.CounterState, now time.Time) error {
	labels := func(ls []string, updated time.Time) error {
		for _, l := range ls {
			if !utf8.ValidString(l) || len(l) > collector.MaxValueBytes {
				return fmt.Errorf("label value %q", l)
			}
		}
		if updated.After(now.Add(24 * time.Hour)) {
			return fmt.Errorf("series of %q updated %s", ls, updated)
		}
		return nil
	}
	for _, r := range cs.Revisions {
		if err := labels(r.Labels[:], r.Updated); err != nil {
			return err
		}
	}
	for _, w := range cs.Workloads {
		if err := labels(w.Labels[:], w.Updated); err != nil {
			return err
		}
		for _, h := range append([]exporter.HistogramCounts{w.RoutingLag}, mapValues(w.Phases)...) {
			if math.IsNaN(h.Sum) || math.IsInf(h.Sum, 0) || h.Sum < 0 {
				return fmt.Errorf("histogram sum %v of %q", h.Sum, w.Labels)
			}
		}
	}
	return nil
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// deleteTerminations removes stored complete terminations by key.
func (s *Store) deleteTerminations(keys [][]byte) error {
	return s.deleteKeys(bucketTerminations, keys)
}

// deleteStartups deletes the stored startups of these pod UIDs.
func (s *Store) deleteStartups(keys [][]byte) error {
	return s.deleteKeys(bucketStartups, keys)
}

func (s *Store) deleteKeys(bucket []byte, keys [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		var errs []error
		for _, k := range keys {
			errs = append(errs, b.Delete(k))
		}
		return errors.Join(errs...)
	})
}

// copyAside copies the state file before invalid parts are dropped from
// it, for whoever wants to know what was in it.
func copyAside(path, aside string) error {
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(aside, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	return errors.Join(err, dst.Close())
}
