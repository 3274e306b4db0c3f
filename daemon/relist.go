package daemon

import (
	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/collector/kube"
	"github.com/drainwatch/drainwatch/correlate"
)

// relist finds the pods deleted from the API while the daemon was down:
// the first pod list after a restart does not contain them, and no watch
// will ever report their deletion. Without this their terminations would
// never complete.
type relist struct {
	pending map[string]bool // pods of the previous run not listed yet
	marked  bool            // the end-of-list marker was sent
}

// restored records the pods the previous run knew.
func (r *relist) restored(s correlate.State) {
	r.pending = make(map[string]bool, len(s.Pods))
	for uid := range s.Pods {
		if _, done := s.Completed[uid]; !done {
			r.pending[uid] = true
		}
	}
}

// seen strikes a pod the API still lists.
func (r *relist) seen(uid string) { delete(r.pending, uid) }

// poll sends the end-of-list marker once the first list has been sent in
// full. It goes through the API channel, after every listed pod, from a
// goroutine: the loop must not block on its own channel. The sink gives up
// once the API side stops, so the goroutine never outlives the daemon.
func (r *relist) poll(k *kube.Kube, sink apiSink) {
	if r.marked || r.pending == nil || k == nil || !k.Synced() {
		return
	}
	r.marked = true
	go sink.send(apiEvent{listed: true})
}

// podsGoneWhileDown reports the pods of the previous run that the first
// list did not contain as deleted now.
func (d *Daemon) podsGoneWhileDown() {
	now := d.cfg.Now()
	for uid := range d.relist.pending {
		d.log.Info().Str("pod_uid", uid).Msg("pod deleted while drainwatch was down")
		d.corr.PodDeleted(collector.PodDeleted{Seen: now, UID: uid})
		d.scopes.PodDeleted(uid, now)
	}
	d.relist.pending = nil
}
