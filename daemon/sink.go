package daemon

import (
	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/collector/kube"
)

// apiEvent is one API-side event on its way to the correlator's loop.
type apiEvent struct {
	pod      *collector.PodUpdate
	deleted  *collector.PodDeleted
	kubelet  *collector.KubeletEvent
	endpoint *collector.EndpointUpdate
	node     *collector.NodeUpdate
	// listed marks the end of the first pod list: every pod of the node
	// was sent before it.
	listed bool
}

// apiSink funnels the informers' callbacks, which run on several
// goroutines, into the loop's channel. It blocks when the loop is behind:
// API events are few and must not be lost. Once done is closed (the API
// side stops; the loop may have exited already) it drops them instead, so
// no informer goroutine stays blocked on a channel nobody reads.
type apiSink struct {
	events chan<- apiEvent
	done   <-chan struct{}
}

func (s apiSink) send(ev apiEvent) {
	select {
	case s.events <- ev:
	case <-s.done:
	}
}

func (s apiSink) Pod(u collector.PodUpdate)           { s.send(apiEvent{pod: &u}) }
func (s apiSink) PodDeleted(d collector.PodDeleted)   { s.send(apiEvent{deleted: &d}) }
func (s apiSink) Kubelet(e collector.KubeletEvent)    { s.send(apiEvent{kubelet: &e}) }
func (s apiSink) Endpoint(u collector.EndpointUpdate) { s.send(apiEvent{endpoint: &u}) }

func (s apiSink) Node(u collector.NodeUpdate) { s.send(apiEvent{node: &u}) }

var (
	_ kube.APISink  = apiSink{}
	_ kube.NodeSink = apiSink{}
)
