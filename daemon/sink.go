package daemon

import "github.com/drainwatch/drainwatch/collector"

// apiEvent is one API-side event on its way to the correlator's loop.
type apiEvent struct {
	pod      *collector.PodUpdate
	deleted  *collector.PodDeleted
	kubelet  *collector.KubeletEvent
	endpoint *collector.EndpointUpdate
	// listed marks the end of the first pod list: every pod of the node
	// was sent before it.
	listed bool
}

// apiSink funnels the informers' callbacks, which run on several
// goroutines, into the loop's channel. It blocks when the loop is behind:
// API events are few and must not be lost.
type apiSink chan<- apiEvent

func (s apiSink) Pod(u collector.PodUpdate)           { s <- apiEvent{pod: &u} }
func (s apiSink) PodDeleted(d collector.PodDeleted)   { s <- apiEvent{deleted: &d} }
func (s apiSink) Kubelet(e collector.KubeletEvent)    { s <- apiEvent{kubelet: &e} }
func (s apiSink) Endpoint(u collector.EndpointUpdate) { s <- apiEvent{endpoint: &u} }

var _ collector.APISink = apiSink(nil)
