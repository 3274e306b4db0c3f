package kube

import (
	"errors"
	"io"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// catchUp is how long after a failing watch opens again its deliveries
// are taken as the backlog of the blind period. The API server sends the
// backlog at once: a relist is delivered before the watch opens (that time
// still counts as failing), a resumed watch replays the watch cache as soon
// as it opens. What remains is the informer's own handler queue, which 2 s
// covers on a loaded node. A real change inside the window is reported as
// unknown: never the other way round.
const catchUp = 2 * time.Second

// blindWindow tracks one watch's runs of failures, so that what it
// delivers while catching up is not stamped with the time it was
// received: the change happened somewhere between the first failure and
// then.
type blindWindow struct {
	mu sync.Mutex
	// since is the first failure of the run, zero while the watch is
	// healthy; back when a watch opened again after it (zero while failing).
	since, back time.Time
}

// failed records a failed list or watch at now.
func (b *blindWindow) failed(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.since.IsZero() {
		b.since = now
	}
	b.back = time.Time{}
}

// opened records a watch opened at now.
func (b *blindWindow) opened(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.since.IsZero() && b.back.IsZero() {
		b.back = now
	}
}

// blindSince is the start of the blind period a delivery at now catches
// up on: the first failure of the run while failing or within catchUp of
// the watch opening again; zero otherwise (the run is then over).
func (b *blindWindow) blindSince(now time.Time) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.back.IsZero() && now.Sub(b.back) > catchUp {
		b.since, b.back = time.Time{}, time.Time{}
	}
	return b.since
}

// watchCalled records a watch call's outcome in b.
func (b *blindWindow) watchCalled(err error, now time.Time) {
	if err == nil {
		b.opened(now)
	} else {
		b.failed(now)
	}
}

// notFailing says whether a watch error handler's err is a routine
// restart: a closed stream or a compacted resource version, after which
// the informer resumes or relists with nothing failing.
func notFailing(err error) bool {
	return errors.Is(err, io.EOF) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}
