package kernel

import (
	"sync"
	"time"
)

// ReaderHealth is the ring-buffer reader's state, for the daemon's liveness.
type ReaderHealth struct {
	// Stopped: the reader goroutine has ended (after Close, or because it
	// failed); no event is read any more.
	Stopped bool
	// FailingSince is the first read error of the current run of errors;
	// zero while reads succeed. Err is the latest.
	FailingSince time.Time
	Err          error
}

// readFailures is the reader's current run of read errors.
type readFailures struct {
	mu    sync.Mutex
	since time.Time
	err   error
}

func (f *readFailures) failed(err error) {
	f.mu.Lock()
	if f.since.IsZero() {
		f.since = time.Now()
	}
	f.err = err
	f.mu.Unlock()
}

func (f *readFailures) recovered() {
	f.mu.Lock()
	f.since, f.err = time.Time{}, nil
	f.mu.Unlock()
}

// ReaderHealth reports whether the reader runs and whether its reads fail.
func (k *Kernel) ReaderHealth() ReaderHealth {
	h := ReaderHealth{}
	select {
	case <-k.done:
		h.Stopped = true
	default:
	}
	k.readErrs.mu.Lock()
	h.FailingSince, h.Err = k.readErrs.since, k.readErrs.err
	k.readErrs.mu.Unlock()
	return h
}
