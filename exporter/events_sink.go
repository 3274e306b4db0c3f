package exporter

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/record/util"
)

// Why an Event was not posted: the values of drainwatch_events_dropped_total's
// reason label.
const (
	// DropUnreachable: the API server could not be reached in eventTries
	// tries, eventRetryEvery apart.
	DropUnreachable = "api_unreachable"
	// DropRejected: the API server refused the Event (it is not retried).
	DropRejected = "rejected"
	// DropQueueFull: the report queue was full (a burst of terminations).
	DropQueueFull = "queue_full"
	// DropWorkloadUnknown: the workload's UID could not be looked up, so
	// its Event could not be addressed (the pod's Event still is).
	DropWorkloadUnknown = "workload_unknown"
)

// Events are retried by client-go's broadcaster: up to eventTries tries,
// eventRetryEvery apart (the first wait randomized), about 2 minutes in
// all: an API server restarting or unreachable for a minute loses none.
// eventTries is client-go's maxTriesPerEvent, which it does not export;
// TestEventDroppedAfterTheBroadcastersTries holds the two together.
const (
	eventTries      = 12
	eventRetryEvery = 10 * time.Second
)

// countingSink is the broadcaster's sink, counting the Events it gives up
// on. The broadcaster retries an Event with the same *Event, one Create or
// Patch per try; a try fails for good on a rejection and is retried on
// anything else (a transport error), as its recordEvent decides.
type countingSink struct {
	record.EventSink
	dropped *prometheus.CounterVec

	mu      sync.Mutex
	retried map[*corev1.Event]retried // the Events being retried
	seq     uint64                    // the last retried.first
}

// retried is an Event's failed tries and the order it first failed in.
type retried struct {
	tries int
	first uint64
}

// maxRetried bounds the Events tracked. The broadcaster retries one Event
// at a time (its sink's watcher tries, sleeps and tries again inline), so
// the entries past the one being retried are Events it stopped retrying
// without a last try (its shutdown): never posted. When the bound is
// reached the oldest is forgotten and counted as dropped (api_unreachable),
// so no drop goes uncounted and the bookkeeping never grows past it.
const maxRetried = 1024

func newCountingSink(s record.EventSink, dropped *prometheus.CounterVec) *countingSink {
	return &countingSink{EventSink: s, dropped: dropped, retried: map[*corev1.Event]retried{}}
}

func (s *countingSink) Create(ev *corev1.Event) (*corev1.Event, error) {
	out, err := s.EventSink.Create(ev)
	s.tried(ev, err, false)
	return out, err
}

func (s *countingSink) Patch(ev *corev1.Event, data []byte) (*corev1.Event, error) {
	out, err := s.EventSink.Patch(ev, data)
	// A patch of an Event gone from the API is followed by a Create.
	s.tried(ev, err, util.IsKeyNotFoundError(err))
	return out, err
}

func (s *countingSink) tried(ev *corev1.Event, err error, createFollows bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var status *apierrors.StatusError
	var construction *restclient.RequestConstructionError
	switch {
	case err == nil:
		delete(s.retried, ev)
	case createFollows:
	case errors.As(err, &status) || errors.As(err, &construction):
		delete(s.retried, ev)
		if !apierrors.IsAlreadyExists(err) {
			s.dropped.WithLabelValues(DropRejected).Inc()
		}
	default:
		s.failedTry(ev)
	}
}

// failedTry counts a try that will be retried, and the Event as dropped
// after its last.
func (s *countingSink) failedTry(ev *corev1.Event) {
	r, ok := s.retried[ev]
	if !ok {
		if len(s.retried) >= maxRetried {
			s.forgetOldest()
		}
		s.seq++
		r.first = s.seq
	}
	r.tries++
	if r.tries == eventTries {
		delete(s.retried, ev)
		s.dropped.WithLabelValues(DropUnreachable).Inc()
		return
	}
	s.retried[ev] = r
}

// forgetOldest drops the Event that failed first (see maxRetried) and
// counts it. A scan: the bound is only reached after 1,023 abandoned Events.
func (s *countingSink) forgetOldest() {
	var oldest *corev1.Event
	for ev, r := range s.retried {
		if oldest == nil || r.first < s.retried[oldest].first {
			oldest = ev
		}
	}
	delete(s.retried, oldest)
	s.dropped.WithLabelValues(DropUnreachable).Inc()
}

// NewEventsDropped is drainwatch_events_dropped_total, the counter an
// EventReporter counts the Events it did not post into (EventOptions.Dropped).
func NewEventsDropped() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drainwatch_events_dropped_total",
		Help: "Warning Events drainwatch did not post, by reason: api_unreachable (retried " +
			"12 times, 10 s apart), rejected (by the API server), queue_full, workload_unknown."},
		[]string{"reason"})
}
