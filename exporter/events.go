package exporter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
)

// EventComponent is the source component of drainwatch's Events.
const EventComponent = "drainwatch"

// Event reasons, one per diagnosis code (DrainProblem for a code this
// version does not know). A clean termination gets no Event.
var eventReasons = map[string]string{
	correlate.DiagListenerClosedEarly: "DrainRefusedConnections",
	correlate.DiagNoDrainDelay:        "DrainNoDelay",
	correlate.DiagStopSignalIgnored:   "DrainStopSignalIgnored",
	correlate.DiagGraceExceeded:       "DrainGracePeriodExceeded",
	correlate.DiagRequestsKilled:      "DrainKilledRequests",
	correlate.DiagPrestopFailed:       "DrainPrestopFailed",
	correlate.DiagBudgetTooSmall:      "DrainBudgetTooSmall",
	correlate.DiagShutdownResets:      "DrainShutdownResets",
	correlate.DiagResetAtExit:         "DrainResetAtExit",
	correlate.DiagStreamsKilled:       "DrainStreamsKilled",
	correlate.DiagStopSignalMismatch:  "DrainStopSignalMismatch",
	correlate.DiagResetOnReuse:        "DrainResetOnReusedConnections",
	correlate.DiagLivenessRestart:     "DrainLivenessRestart",
	correlate.DiagOOMKilled:           "DrainOOMKilled",
	correlate.DiagContainerCrashed:    "DrainContainerCrashed",
	correlate.DiagStopSignalKills:     "DrainStopSignalKillsServer",
	correlate.DiagExitedInflight:      "DrainExitedWithRequestsInFlight",
	correlate.DiagCrashedDuringDrain:  "DrainCrashedDuringDrain",
	correlate.DiagBlackholed:          "DrainBlackholedConnections",
	correlate.DiagRefusedInsidePod:    "DrainRefusedInsidePod",
	// The new pods' side: a startup's diagnosis.
	correlate.DiagReadyBeforeListening: "StartupReadyBeforeListening",
	correlate.DiagReadyBeforeServing:   "StartupReadyBeforeServing",
}

// EventReason returns the Event reason of a diagnosis code ("" for clean).
func EventReason(code string) string {
	if code == correlate.DiagClean {
		return ""
	}
	if r, ok := eventReasons[code]; ok {
		return r
	}
	return "DrainProblem"
}

// EventOptions configure an EventReporter.
type EventOptions struct {
	// Node is the source host of the Events.
	Node string
	// Correlator rate-limits and aggregates Events; zero values take
	// client-go's defaults (a burst of 25 per object, then one per 5 min).
	Correlator record.CorrelatorOptions
	// RetryEvery spaces the tries of an Event the API server could not be
	// reached for; 10 s when zero (tests shorten it).
	RetryEvery time.Duration
	// Dropped counts the Events not posted (NewEventsDropped, registered by
	// the daemon with its other collectors); a counter of its own when nil.
	Dropped *prometheus.CounterVec
}

// EventClient is what the EventReporter uses of the API: Events, and the
// workloads they are about. collector/kube's Clients and client-go's
// Clientset satisfy it; the daemon passes the former, which does not link
// every API group's client.
type EventClient interface {
	CoreV1() typedcorev1.CoreV1Interface
	AppsV1() appsv1client.AppsV1Interface
	BatchV1() batchv1client.BatchV1Interface
}

// EventReporter posts a Warning Event on the pod and on its workload for each
// non-clean diagnosis of a completed termination, so `kubectl describe` and
// `kubectl get events` show what was lost and the fix. Events go through
// client-go's broadcaster: its correlator aggregates repeats and its spam
// filter rate-limits them per object.
type EventReporter struct {
	client      EventClient
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	log         zerolog.Logger

	queue   chan eventSubject
	dropped *prometheus.CounterVec
	stop    context.CancelFunc
	done    chan struct{}

	mu sync.Mutex
	// reported and reportedBefore are the termination keys reported, so a
	// replayed termination is reported once: two generations of up to
	// maxReported each, the older dropped when the newer fills, so that
	// the set stays bounded however many pods a node sees stop.
	reported, reportedBefore map[string]bool
	uids                     map[workloadKey]types.UID
}

// maxReported bounds a generation of reported keys: a replay comes from
// the correlator's restored state, terminations of the last minutes, far
// fewer than this.
const maxReported = 4096

// eventCacheSize bounds each of the three caches of client-go's Event
// correlator (aggregation, spam filter, Event log). client-go's default,
// 4096 entries each, is sized like the kubelet's for every Event of its
// node's pods; an aggregation entry holds the messages it saw (up to 1 KiB
// each). drainwatch posts a few Events per termination, about pods that are
// gone and their workloads, and the aggregation window is 10 minutes: 512
// entries cover a node's worst rollout in that window, and the caches stop
// growing ~8 times sooner (the hour-long soak's heap profiles showed them
// still filling at minute 40).
const eventCacheSize = 512

// reportQueue bounds the terminations waiting for their Events: a burst of
// terminations larger than this loses Events, never blocks the daemon.
const reportQueue = 256

// NewEventReporter starts the broadcaster and the goroutine that records
// reported terminations; call Shutdown to stop both.
func NewEventReporter(client EventClient, log zerolog.Logger, opts EventOptions) *EventReporter {
	if opts.Correlator.LRUCacheSize == 0 {
		opts.Correlator.LRUCacheSize = eventCacheSize
	}
	b := record.NewBroadcaster(record.WithCorrelatorOptions(opts.Correlator),
		record.WithSleepDuration(cmp.Or(opts.RetryEvery, eventRetryEvery)))
	dropped := opts.Dropped
	if dropped == nil {
		dropped = NewEventsDropped()
	}
	b.StartRecordingToSink(newCountingSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}, dropped))
	ctx, stop := context.WithCancel(context.Background())
	r := &EventReporter{
		client: client, broadcaster: b, log: log, dropped: dropped,
		recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: EventComponent, Host: opts.Node}),
		queue:    make(chan eventSubject, reportQueue), stop: stop, done: make(chan struct{}),
		reported: map[string]bool{}, uids: map[workloadKey]types.UID{},
	}
	go r.run(ctx)
	return r
}

func (r *EventReporter) run(ctx context.Context) {
	defer close(r.done)
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-r.queue:
			r.record(ctx, s)
		}
	}
}

// Shutdown stops recording and the broadcaster (Events not yet sent are
// dropped).
func (r *EventReporter) Shutdown() {
	r.stop()
	<-r.done
	r.broadcaster.Shutdown()
}

// Report queues a completed termination for Record without blocking (the
// workload lookup is an API call): false when the queue is full and its
// Events are dropped.
func (r *EventReporter) Report(t correlate.Termination) bool {
	return r.enqueue(terminationSubject(t))
}

// ReportStartup queues a complete startup of a new pod like Report: its
// pod and workload get an Event per diagnosis (ready_before_listening,
// ready_before_serving).
func (r *EventReporter) ReportStartup(s correlate.Startup) bool {
	if len(s.Diagnoses) == 0 {
		return true
	}
	return r.enqueue(startupSubject(s))
}

func (r *EventReporter) enqueue(s eventSubject) bool {
	select {
	case r.queue <- s:
		return true
	default:
		r.log.Warn().Str("pod", s.pod).Msgf("Event queue full: no Event for this %s", s.what)
		r.dropped.WithLabelValues(DropQueueFull).Add(float64(podEvents(s)))
		return false
	}
}

// eventSubject is what the Events of one record are about: a complete
// termination, or a new pod's complete startup.
type eventSubject struct {
	key, what   string // the record's key (once per key), "termination" or "startup"
	pod, podUID string
	workload    collector.Workload
	prefix      string // first in each message (the termination's cause)
	diagnoses   []correlate.Diagnosis
	complete    bool
}

func terminationSubject(t correlate.Termination) eventSubject {
	return eventSubject{key: t.Key(), what: "termination", pod: t.Pod, podUID: t.PodUID, workload: t.Workload,
		prefix: causePrefix(t), diagnoses: t.Diagnoses, complete: t.Complete}
}

// startupSubject keys a startup apart from the pod's termination.
func startupSubject(s correlate.Startup) eventSubject {
	return eventSubject{key: "startup/" + s.PodUID, what: "startup", pod: s.Pod, podUID: s.PodUID, workload: s.Workload,
		prefix: "startup: ", diagnoses: s.Diagnoses, complete: s.Complete}
}

// Dropped is drainwatch_events_dropped_total, for the daemon's registry.
func (r *EventReporter) Dropped() prometheus.Collector { return r.dropped }

// podEvents is how many Events a record's pod gets: one per non-clean
// diagnosis.
func podEvents(s eventSubject) int {
	n := 0
	for _, d := range s.diagnoses {
		if EventReason(d.Code) != "" {
			n++
		}
	}
	return n
}

// Record records the Events of a completed termination and returns how
// many it recorded (0 for clean, incomplete or already reported ones).
func (r *EventReporter) Record(ctx context.Context, t correlate.Termination) int {
	return r.record(ctx, terminationSubject(t))
}

// RecordStartup records the Events of a complete startup, as Record.
func (r *EventReporter) RecordStartup(ctx context.Context, s correlate.Startup) int {
	return r.record(ctx, startupSubject(s))
}

func (r *EventReporter) record(ctx context.Context, s eventSubject) int {
	if !s.complete || !r.firstReport(s.key) {
		return 0
	}
	pod := &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: s.workload.Namespace,
		Name: s.pod, UID: types.UID(s.podUID)}
	workload, err := r.workloadRef(ctx, s.workload)
	switch {
	case errors.Is(err, errNoWorkload):
	case err != nil:
		// The API server unreachable (an outage) or the workload gone:
		// the workload's Events cannot be addressed, the pod's still are.
		r.log.Warn().Err(err).Str("pod", s.pod).Msg("no workload Event: its UID could not be looked up")
		r.dropped.WithLabelValues(DropWorkloadUnknown).Add(float64(podEvents(s)))
	}
	n := 0
	for _, d := range s.diagnoses {
		reason := EventReason(d.Code)
		if reason == "" {
			continue
		}
		r.recorder.Event(pod, corev1.EventTypeWarning, reason, eventMessage(d, s.prefix))
		n++
		if workload != nil {
			r.recorder.Event(workload, corev1.EventTypeWarning, reason,
				eventMessage(d, fmt.Sprintf("pod %s (revision %s): %s", s.pod, s.workload.Revision, s.prefix)))
			n++
		}
	}
	return n
}

func (r *EventReporter) firstReport(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reported[key] || r.reportedBefore[key] {
		return false
	}
	if len(r.reported) >= maxReported {
		r.reported, r.reportedBefore = map[string]bool{}, r.reported
	}
	r.reported[key] = true
	return true
}

// maxEventMessage is the API server's limit on an Event's message.
const maxEventMessage = 1024

// causePrefix says why the pod stopped, first in each Event's message
// ("rollout: ", "node_pressure (Evicted): "), so `kubectl describe` answers
// "why did it stop" before "what did it lose".
func causePrefix(t correlate.Termination) string {
	if t.Cause == "" {
		return ""
	}
	if t.CauseEvidence != "" {
		return fmt.Sprintf("%s (%s): ", t.Cause, t.CauseEvidence)
	}
	return t.Cause + ": "
}

func eventMessage(d correlate.Diagnosis, prefix string) string {
	msg := prefix + d.Message
	if d.Fix != "" {
		msg += ". Fix: " + d.Fix
	}
	if len(msg) > maxEventMessage {
		msg = msg[:maxEventMessage-3] + "..."
	}
	return msg
}
