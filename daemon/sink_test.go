package daemon

import (
	"testing"

	"github.com/drainwatch/drainwatch/collector"
)

const sinkPod = "0c1d2e3f-0000-4000-8000-00000000000a"

// TestAPISinkGivesUpWhenStopped: once the API side stops, a send to a
// loop that no longer reads returns instead of blocking its informer.
func TestAPISinkGivesUpWhenStopped(t *testing.T) {
	events, done := make(chan apiEvent), make(chan struct{})
	close(done)
	sink := apiSink{events: events, done: done}
	sink.Pod(collector.PodUpdate{})
	sink.Endpoint(collector.EndpointUpdate{})
	sink.send(apiEvent{listed: true})

	buffered := make(chan apiEvent, 1)
	apiSink{events: buffered, done: make(chan struct{})}.PodDeleted(collector.PodDeleted{UID: sinkPod})
	if ev := <-buffered; ev.deleted == nil || ev.deleted.UID != sinkPod {
		t.Errorf("a running loop received %+v, want the deletion of %s", ev, sinkPod)
	}
}
