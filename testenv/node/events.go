package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Event reasons the kubelet records (pkg/kubelet/events).
const (
	ReasonKilling           = "Killing"
	ReasonFailedPreStopHook = "FailedPreStopHook"
	ReasonStarted           = "Started"
	ReasonCreated           = "Created"
	ReasonUnhealthy         = "Unhealthy"
)

// eventSink records core/v1 Events like the kubelet's recorder: the time is
// taken when the event happens, the API write happens in the background so
// it never delays what comes next (preStop after Killing).
type eventSink struct {
	client kubernetes.Interface
	node   string
	log    zerolog.Logger
	queue  chan *corev1.Event
	seen   map[string]*corev1.Event // written events by identity, for counting repeats
}

// maxSeenEvents bounds the repeat-counting cache.
const maxSeenEvents = 4096

func newEventSink(client kubernetes.Interface, node string, log zerolog.Logger) *eventSink {
	return &eventSink{client: client, node: node, log: log, queue: make(chan *corev1.Event, 1000),
		seen: map[string]*corev1.Event{}}
}

// record queues an event about a container of a pod.
func (s *eventSink) record(pod *corev1.Pod, container, typ, reason, message string) {
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", pod.Name, now.UnixNano()),
			Namespace: pod.Namespace,
		},
		InvolvedObject: corev1.ObjectReference{
			Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
			UID: pod.UID, ResourceVersion: pod.ResourceVersion,
		},
		Reason: reason, Message: message, Type: typ, Count: 1,
		Source:         corev1.EventSource{Component: "kubelet", Host: s.node},
		FirstTimestamp: now, LastTimestamp: now,
		ReportingController: "kubelet", ReportingInstance: s.node,
	}
	if container != "" {
		ev.InvolvedObject.FieldPath = fmt.Sprintf("spec.containers{%s}", container)
	}
	select {
	case s.queue <- ev:
	default:
		s.log.Warn().Str("reason", reason).Str("pod", pod.Name).Msg("event queue full, event dropped")
	}
}

// run writes queued events until ctx ends, then flushes what is queued
// (bounded by a 5 s timeout).
func (s *eventSink) run(ctx context.Context) {
	for {
		select {
		case ev := <-s.queue:
			s.write(ctx, ev)
		case <-ctx.Done():
			s.flush()
			return
		}
	}
}

func (s *eventSink) flush() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		select {
		case ev := <-s.queue:
			s.write(ctx, ev)
		default:
			return
		}
	}
}

// write creates the event, or, like the kubelet's EventCorrelator, bumps
// count and lastTimestamp of the identical event already written (same
// object, container, type, reason and message), so a probe failing every
// period is one Event with a growing count.
func (s *eventSink) write(ctx context.Context, ev *corev1.Event) {
	key := strings.Join([]string{string(ev.InvolvedObject.UID), ev.InvolvedObject.FieldPath, ev.Type, ev.Reason, ev.Message}, "\x00")
	if prev, ok := s.seen[key]; ok {
		prev.Count++
		body := fmt.Sprintf(`{"count":%d,"lastTimestamp":%q}`, prev.Count, ev.LastTimestamp.UTC().Format(time.RFC3339))
		_, err := s.client.CoreV1().Events(prev.Namespace).Patch(ctx, prev.Name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		if err == nil {
			return
		}
		delete(s.seen, key) // expired or deleted: write it anew
	}
	created, err := s.create(ctx, ev)
	if err != nil {
		s.log.Warn().Err(err).Str("reason", ev.Reason).Str("pod", ev.InvolvedObject.Name).Msg("recording event")
		return
	}
	if len(s.seen) >= maxSeenEvents {
		clear(s.seen)
	}
	s.seen[key] = created
	s.log.Debug().Str("reason", ev.Reason).Str("pod", ev.InvolvedObject.Name).Str("message", ev.Message).Msg("event")
}

// Like the kubelet's recorder (client-go's broadcaster), an Event the API
// server could not be reached for is tried again, up to eventTries times
// eventRetryEvery apart; one it rejected is not.
const (
	eventTries      = 12
	eventRetryEvery = 10 * time.Second
)

func (s *eventSink) create(ctx context.Context, ev *corev1.Event) (*corev1.Event, error) {
	for try := 1; ; try++ {
		created, err := s.client.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
		var status apierrors.APIStatus
		if err == nil || errors.As(err, &status) || try == eventTries || ctx.Err() != nil {
			return created, err
		}
		s.log.Warn().Err(err).Str("reason", ev.Reason).Int("try", try).Msg("recording event; retrying")
		select {
		case <-ctx.Done():
		case <-time.After(eventRetryEvery):
		}
	}
}
