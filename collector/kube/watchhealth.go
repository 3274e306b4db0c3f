package kube

import (
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
)

// failureQuiet ends a run of watch failures: the reflector retries a failed
// list or watch after at most 30 s of backoff, doubled by its jitter, so no
// new failure for longer than this means the last retry holds a watch.
const failureQuiet = 2 * time.Minute

// watchHealth tracks whether the pod watch keeps failing: what the daemon's
// liveness reports. A watch that fails a while is harmless (the kernel side
// keeps counting and the informer relists on return); one that fails for
// minutes leaves the daemon blind to the pods it measures.
type watchHealth struct {
	now         func() time.Time
	mu          sync.Mutex
	since, last time.Time
	err         error
}

// failed is the pod informer's watch error handler.
func (h *watchHealth) failed(_ *cache.Reflector, err error) {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.since.IsZero() || now.Sub(h.last) > failureQuiet {
		h.since = now
	}
	h.last, h.err = now, err
}

// received ends a run of failures: an event came through the watch.
func (h *watchHealth) received() {
	h.mu.Lock()
	h.since, h.last, h.err = time.Time{}, time.Time{}, nil
	h.mu.Unlock()
}

// WatchFailure is a run of failed pod lists and watches.
type WatchFailure struct {
	// Since is the first failure of the run; zero when the watch is not
	// failing.
	Since time.Time
	Err   error
}

// WatchFailure reports the pod watch's current run of failures, if any.
func (k *Kube) WatchFailure() WatchFailure {
	h := &k.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.since.IsZero() || h.now().Sub(h.last) > failureQuiet {
		return WatchFailure{}
	}
	return WatchFailure{Since: h.since, Err: h.err}
}
