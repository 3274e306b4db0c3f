package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/drainwatch/drainwatch/correlate"
)

// stateMetrics count what happened to the state file: resets at start and
// checkpoints that could not be written.
type stateMetrics struct {
	resets   *prometheus.CounterVec
	failures prometheus.Counter
}

func newStateMetrics(reg prometheus.Registerer) stateMetrics {
	m := stateMetrics{
		resets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drainwatch_state_file_reset_total",
			Help: "State files set aside at start: unreadable ones (reason truncated, corrupt, future_version) moved, the daemon starting afresh; readable ones holding invalid values (reason invalid) copied, those parts dropped and the rest restored.",
		}, []string{"reason"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "drainwatch_checkpoint_failures_total",
			Help: "Checkpoints of the state store that failed (a full or read-only disk): counting goes on, a restart would lose what was not saved.",
		}),
	}
	reg.MustRegister(m.resets, m.failures)
	return m
}

// restoredState is what a start reads from the state dir.
type restoredState struct {
	store     *Store
	cp        Checkpoint
	restored  bool
	completed []correlate.Termination
	startups  []correlate.Startup
	// badStartups are the keys of stored startups that could not be
	// decoded or that dropInvalid dropped.
	badStartups [][]byte
}

// openState opens the store and reads it whole. A state file this run
// cannot read (truncated, corrupt, of a later version) is renamed aside
// with a timestamp, logged and counted, and the daemon starts afresh: a
// daemon that exits on it would only be restarted into the same failure.
// What cannot be fixed by moving the file (another drainwatch holding the
// lock, a state dir that cannot be written) stays an error.
func openState(dir string, log zerolog.Logger, m stateMetrics, now time.Time) (restoredState, error) {
	path := filepath.Join(dir, storeFile)
	for {
		st, reason, err := tryOpenState(dir, path)
		if reason == "" && err == nil {
			return st, setInvalidAside(&st, path, log, m, now)
		}
		if reason == "" {
			return st, err
		}
		aside := fmt.Sprintf("%s.%s-%s", path, reason, now.UTC().Format("20060102T150405Z"))
		if rerr := os.Rename(path, aside); rerr != nil {
			return restoredState{}, fmt.Errorf("moving the unreadable state file %s aside: %w", path, rerr)
		}
		m.resets.WithLabelValues(reason).Inc()
		log.Error().Err(err).Str("reason", reason).Str("moved_to", aside).
			Msg("state file unreadable: moved aside, starting afresh (terminations in progress before this start are partial, counters restart from zero)")
	}
}

// setInvalidAside drops the parts of a readable state that fail their
// semantic checks (dropInvalid): a copy of the file is set aside first,
// logged and counted (reason invalid), and the daemon starts empty for
// those parts only. Only a store that cannot be written is an error.
func setInvalidAside(st *restoredState, path string, log zerolog.Logger, m stateMetrics, now time.Time) error {
	bad, invalid := st.dropInvalid(now)
	if invalid == nil {
		return nil
	}
	aside := fmt.Sprintf("%s.%s-%s", path, resetInvalid, now.UTC().Format("20060102T150405Z"))
	if err := copyAside(path, aside); err != nil {
		log.Warn().Err(err).Str("path", aside).Msg("could not copy the state file aside before dropping its invalid parts")
		aside = ""
	}
	m.resets.WithLabelValues(resetInvalid).Inc()
	log.Error().Err(invalid).Str("reason", resetInvalid).Str("copied_to", aside).
		Msg("state file holds invalid values: those parts dropped, the rest restored")
	if err := errors.Join(st.store.deleteTerminations(bad), st.store.deleteStartups(st.badStartups)); err != nil {
		st.store.Close()
		return fmt.Errorf("deleting the invalid terminations from %s: %w", path, err)
	}
	return nil
}

// tryOpenState returns the reason to move the file aside, or the state.
func tryOpenState(dir, path string) (st restoredState, reason string, err error) {
	if reason, err := checkStateFile(path); reason != "" || err != nil {
		return st, reason, err
	}
	// bbolt reads the file through a memory map: a corrupt page pointing
	// past it faults. Such a fault panics here instead of killing the
	// process, and bbolt's own panics on corrupt pages are recovered: the
	// file is corrupt.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if st.store != nil {
				st.store.Close()
			}
			st, reason, err = restoredState{}, resetCorrupt, fmt.Errorf("reading state store %s: %v", path, p)
		}
	}()
	if st.store, err = OpenStore(dir); err != nil {
		return restoredState{}, openFailure(err), err
	}
	if err = st.store.check(); err == nil {
		st.cp, st.restored, err = st.store.LoadCheckpoint()
	}
	if err == nil {
		st.completed, err = st.store.Completed()
	}
	if err == nil {
		st.startups, st.badStartups, err = st.store.readStartups()
	}
	if err != nil {
		st.store.Close()
		return restoredState{}, resetCorrupt, err
	}
	return st, "", nil
}

// openFailure is the reason an OpenStore error calls for moving the file
// aside, "" for the errors a new file would not fix.
func openFailure(err error) string {
	switch {
	case errors.Is(err, errFutureVersion):
		return resetFutureVersion
	case errors.Is(err, bolterrors.ErrInvalid), errors.Is(err, bolterrors.ErrChecksum),
		errors.Is(err, bolterrors.ErrVersionMismatch), errors.Is(err, bolterrors.ErrInvalidMapping):
		return resetCorrupt
	}
	return ""
}

// check walks every page of the store (bbolt's consistency check): a
// corrupt page found now is a reset, not a panic in a later checkpoint.
func (s *Store) check() error {
	return s.db.View(func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("state store consistency check: %w", err)
		}
		return nil
	})
}
