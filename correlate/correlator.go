package correlate

import (
	"sort"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// Correlator turns the node's kernel and API events into Terminations. It
// is not safe for concurrent use: the daemon feeds it from one goroutine.
type Correlator struct {
	cfg Config
	// probeComms is cfg.ProbeComms as the kernel spells command names.
	probeComms []collector.Comm
	pods       map[string]*podState
	idx        index
	// done holds when each complete termination completed, for
	// Config.Retention: it stops a replayed API or node event from starting
	// a second termination of the pod. The records themselves are Tick's
	// caller's to keep (Tick returns each once): holding them here cost
	// tens of KiB per termination for an hour.
	done map[string]time.Time
	gaps []kernelGap
	// unattributed counts kernel events no pod claimed, by type.
	unattributed [256]uint64
	// steadyReuse counts resets on reused connections outside
	// terminations, by workload, until TakeSteadyReuseResets.
	steadyReuse map[collector.Workload]int
	// kernelSeen is the latest kernel event time processed; replay, set
	// by Restore, drops kernel events already counted before the snapshot.
	kernelSeen, replay Watermark
	// podsSeen is the latest Seen of the pod updates processed: how far
	// the pod watch, which delivers in order, has been read. A stop signal
	// is judged a container restart on this clock, not the loop's, which
	// under load processes updates seconds after they were seen.
	podsSeen time.Time
	// nodes names peer addresses for RoutingSources (peernames.go).
	nodes nodeTable
	// ended holds the container terminations that ended between two
	// Ticks (a restart seen by the next stop): the next Tick returns them.
	ended []Termination
	// refusals remembers the SYNs refused in terminations, so that a
	// retransmission of one (its RST was lost) is not a second attempt.
	refusals synMemory
	// startupsDone are startups that ended with their pod's state, until
	// TakeStartups; startupSyns remembers the SYNs startups counted.
	startupsDone []Startup
	startupSyns  synMemory
}

// Watermark is the latest kernel event time processed and how many
// events carried exactly that time: restoring a snapshot skips exactly the
// events it already counted, even those sharing a timestamp.
type Watermark struct {
	At   time.Time `json:"at,omitzero"`
	Ties int       `json:"ties,omitempty"`
}

// kernelGap is a span in which kernel events were lost or not collected;
// a zero To is still open.
type kernelGap struct {
	Reason string    `json:"reason"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to,omitzero"`
}

// New returns an empty Correlator.
func New(cfg Config) *Correlator {
	cfg = cfg.withDefaults()
	return &Correlator{
		cfg:        cfg,
		probeComms: commsOf(cfg.ProbeComms),
		pods:       make(map[string]*podState),
		idx:        newIndex(),
		done:       make(map[string]time.Time),
	}
}

// pod returns the state of uid, creating a placeholder when the daemon
// learns of a pod from the node (netns, cgroup) before the API.
func (c *Correlator) pod(uid string) *podState {
	p := c.pods[uid]
	if p == nil {
		p = &podState{Pod: collector.Pod{UID: uid}}
		c.pods[uid] = p
	}
	return p
}

// BindNetns records the network namespace inode of a pod's sandbox.
func (c *Correlator) BindNetns(podUID string, ino uint32) {
	if _, done := c.done[podUID]; done || ino == 0 {
		return
	}
	p := c.pod(podUID)
	if p.NetnsIno != 0 && c.idx.Netns[p.NetnsIno] == podUID {
		delete(c.idx.Netns, p.NetnsIno)
	}
	// Inode numbers are reused once a namespace is freed: the latest
	// binding wins.
	p.NetnsIno = ino
	c.idx.Netns[ino] = podUID
	if p.Startup != nil {
		p.Startup.S.NetnsBound = true
	}
}

// BindCgroup records the cgroup id of one container of a pod.
func (c *Correlator) BindCgroup(podUID, container string, cgroupID uint64) {
	if _, done := c.done[podUID]; done || cgroupID == 0 {
		return
	}
	p := c.pod(podUID)
	if p.Cgroups == nil {
		p.Cgroups = make(map[string]uint64)
	}
	// A restarted container has a new cgroup: forget the old one's id so a
	// crash-looping pod does not grow the index (and every checkpoint).
	if old, ok := p.Cgroups[container]; ok && old != cgroupID && c.idx.Cgroups[old].UID == podUID {
		delete(c.idx.Cgroups, old)
	}
	p.Cgroups[container] = cgroupID
	c.idx.Cgroups[cgroupID] = cgroupRef{UID: podUID, Container: container}
}

// Unattributed returns the number of kernel events no pod claimed, by type.
func (c *Correlator) Unattributed() map[collector.EventType]uint64 {
	m := make(map[collector.EventType]uint64)
	for t, n := range c.unattributed {
		if n > 0 {
			m[collector.EventType(t)] = n
		}
	}
	return m
}

// Get returns the termination of a pod in progress; a complete one is no
// longer the correlator's (Tick returned it).
func (c *Correlator) Get(uid string) (Termination, bool) {
	p := c.pods[uid]
	if p == nil || p.Term == nil || p.Term.Tentative {
		return Termination{}, false
	}
	return c.evaluate(p, false), true
}

// Terminations returns every termination in progress, oldest first. Their
// diagnoses are provisional; complete ones are Tick's results.
func (c *Correlator) Terminations() []Termination {
	var ts []Termination
	for uid := range c.pods {
		if t, ok := c.Get(uid); ok {
			ts = append(ts, t)
		}
	}
	sort.Slice(ts, func(i, j int) bool {
		a, b := ts[i].Start(), ts[j].Start()
		if !a.Equal(b) {
			return a.Before(b)
		}
		return ts[i].PodUID < ts[j].PodUID
	})
	return ts
}

// SeeBlackholes says whether the kernel reports blackholed SYNs
// (Config.Blackholes), once its probes are attached.
func (c *Correlator) SeeBlackholes(on bool) { c.cfg.Blackholes = on }
