package kube

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drainwatch/drainwatch/collector"
)

// blockingSink blocks in Endpoint until released, as the daemon's channel
// does when its loop is behind or gone.
type blockingSink struct {
	entered chan struct{}
	release chan struct{}
	got     []collector.EndpointUpdate
}

func (s *blockingSink) Pod(collector.PodUpdate)         {}
func (s *blockingSink) PodDeleted(collector.PodDeleted) {}
func (s *blockingSink) Kubelet(collector.KubeletEvent)  {}
func (s *blockingSink) Endpoint(u collector.EndpointUpdate) {
	s.entered <- struct{}{}
	<-s.release
	s.got = append(s.got, u)
}

// TestEndpointSinkBlockedDoesNotBlockStop: a slice event whose update the
// sink does not take yet must not hold the watch's mutex, or stopAll (the
// daemon's shutdown) would wait for a sink nobody reads and leak the
// watches.
func TestEndpointSinkBlockedDoesNotBlockStop(t *testing.T) {
	sink := &blockingSink{entered: make(chan struct{}), release: make(chan struct{})}
	k := &Kube{cfg: Config{Sink: sink, Now: func() time.Time { return t0 }}}
	w := newEndpointWatch(k)
	w.pods[localA] = localPod{namespace: "shop"}
	nw := newNamespaceWatch(w, "shop")
	nw.svcStop = make(chan struct{})
	web := &serviceSlices{service: "web", stop: make(chan struct{})}
	nw.slices["web"] = web
	w.namespaces["shop"] = nw
	handled := make(chan struct{})
	go func() {
		nw.sliceHandler(web).OnAdd(slice("web-1", "web", time.Time{}, ep(localA, yes, yes, no)), false)
		close(handled)
	}()
	<-sink.entered
	stopped := make(chan struct{})
	go func() { w.stopAll(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second): // a deadlock detector, not a timing check
		t.Fatal("stopAll waits for the sink: the update is sent with the watch's mutex held")
	}
	if len(w.namespaces) != 0 || !nw.stopped {
		t.Errorf("after stopAll: %d namespace watches, stopped %v; want 0, true", len(w.namespaces), nw.stopped)
	}
	close(sink.release)
	<-handled
	want := []collector.EndpointUpdate{upd(localA, true, true, true, false, time.Time{})}
	if diff := cmp.Diff(want, sink.got); diff != "" {
		t.Errorf("updates sent (-want +got):\n%s", diff)
	}
}
