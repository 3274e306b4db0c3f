package correlate

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// State is the correlator's whole state, JSON-serialisable, for restart
// safety: the daemon persists it and restores it after a restart.
type State struct {
	Pods  map[string]*podState `json:"pods"`
	Index index                `json:"index"`
	// Completed holds the pods whose termination is complete, with when:
	// enough to ignore their replayed events. The records themselves are
	// the daemon's to persist (Tick returns each once), so after Restore
	// Get and Terminations no longer list them.
	Completed    map[string]time.Time           `json:"completed,omitempty"`
	Gaps         []kernelGap                    `json:"gaps,omitempty"`
	Unattributed map[collector.EventType]uint64 `json:"unattributed,omitempty"`
	// SteadyReuse are the resets on reused connections outside
	// terminations not taken yet (TakeSteadyReuseResets).
	SteadyReuse []WorkloadCount `json:"steady_reuse,omitempty"`
	// KernelWatermark is the latest kernel event time counted (and how many
	// events had that time). After a restore, kernel events up to it are
	// replays and are dropped; the daemon should report
	// KernelGap("daemon_down", KernelWatermark.At, restart time) for what
	// it could not see while down.
	KernelWatermark Watermark `json:"kernel_watermark"`
}

// Snapshot returns a deep copy of the state: it shares nothing with the
// correlator, so it may be serialised while events keep flowing. It fails
// only when a time cannot be represented in JSON (a year outside 0-9999).
func (c *Correlator) Snapshot() (State, error) {
	s := State{
		Pods: c.pods, Index: c.idx, Gaps: c.gaps, Completed: make(map[string]time.Time, len(c.done)),
		Unattributed: c.Unattributed(), KernelWatermark: c.kernelSeen, SteadyReuse: steadyList(c.steadyReuse),
	}
	maps.Copy(s.Completed, c.done)
	return clone(s)
}

// Restore replaces the correlator's state with s. Replayed events count
// nothing twice: API events are idempotent (first marks win, complete
// terminations ignore them) and kernel events up to the watermark are
// dropped.
func (c *Correlator) Restore(s State) error {
	s, err := clone(s)
	if err != nil {
		return err
	}
	c.pods, c.idx, c.gaps = s.Pods, s.Index, s.Gaps
	if c.pods == nil {
		c.pods = make(map[string]*podState)
	}
	c.done = make(map[string]time.Time, len(s.Completed))
	maps.Copy(c.done, s.Completed)
	if c.idx.Netns == nil || c.idx.Cgroups == nil || c.idx.IPs == nil {
		c.idx = newIndex()
		for _, p := range c.pods {
			c.reindex(p)
		}
	}
	c.unattributed = [256]uint64{}
	for t, n := range s.Unattributed {
		c.unattributed[t] = n
	}
	c.steadyReuse = nil
	for _, wc := range s.SteadyReuse {
		c.addSteadyReuseN(wc.Workload, wc.N)
	}
	c.kernelSeen, c.replay = s.KernelWatermark, s.KernelWatermark
	return nil
}

// reindex rebuilds a pod's index entries (for a State without an index).
func (c *Correlator) reindex(p *podState) {
	if p.NetnsIno != 0 {
		c.idx.Netns[p.NetnsIno] = p.Pod.UID
	}
	for name, id := range p.Cgroups {
		c.idx.Cgroups[id] = cgroupRef{UID: p.Pod.UID, Container: name}
	}
	for _, ip := range p.Pod.Addrs() {
		c.idx.ownIP(ip, p.Pod.UID, time.Time{})
	}
}

// clone deep-copies a State through its JSON form, the form it is
// persisted in, so a snapshot that round-trips here round-trips on disk.
func clone(s State) (State, error) {
	var out State
	b, err := json.Marshal(s)
	if err != nil {
		return out, fmt.Errorf("serialising correlator state: %w", err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("deserialising correlator state: %w", err)
	}
	return out, nil
}
