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

	mu    sync.Mutex
	tries map[*corev1.Event]int // failed tries of the Events being retried
}

// maxRetried bounds tries: Events the broadcaster stopped retrying without
// a last try (its shutdown) are forgotten past it.
const maxRetried = 1024

func newCountingSink(s record.EventSink, dropped *prometheus.CounterVec) *countingSink {
	return &countingSink{EventSink: s, dropped: dropped, tries: map[*corev1.Event]int{}}
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
		delete(s.tries, ev)
	case createFollows:
	case errors.As(err, &status) || errors.As(err, &construction):
		delete(s.tries, ev)
		if !apierrors.IsAlreadyExists(err) {
			s.dropped.WithLabelValues(DropRejected).Inc()
		}
	default:
		if len(s.tries) >= maxRetried {
			clear(s.tries)
		}
		s.tries[ev]++
		if s.tries[ev] == eventTries {
			delete(s.tries, ev)
			s.dropped.WithLabelValues(DropUnreachable).Inc()
		}
	}
}

func newDroppedEvents() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drainwatch_events_dropped_total",
		Help: "Warning Events drainwatch did not post, by reason: api_unreachable (retried " +
			"12 times, 10 s apart), rejected (by the API server), queue_full, workload_unknown."},
		[]string{"reason"})
}
