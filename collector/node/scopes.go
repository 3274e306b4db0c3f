package node

import (
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/collector"
)

const (
	// rescanEvery bounds cgroup walks while some pod recently changed
	// waits for its cgroups; a pod stuck before its containers start (an
	// image that cannot be pulled) is retried every rescanSlow only.
	rescanEvery = 200 * time.Millisecond
	rescanSlow  = 5 * time.Second
	// rescanForced spaces the walks a burst of container announcements
	// asks for; the tick's scan picks up what a skipped walk would have.
	rescanForced = 20 * time.Millisecond
	recentPod    = 30 * time.Second
	// releaseAfter releases the scopes of a deleted pod whose termination
	// never completed in the correlator (it never ran): see
	// collector.PodTail, which all end-of-life timers derive from.
	releaseAfter = collector.ScopeRelease
)

// Watcher is the kernel's side of scope binding: *kernel.Kernel keeps these
// in its BPF maps (an interface, so this package does not link the eBPF
// loader).
type Watcher interface {
	WatchNetns(ino uint32) error
	UnwatchNetns(ino uint32) error
	WatchCgroup(id uint64) error
	UnwatchCgroup(id uint64) error
	WatchAddr(a netip.Addr) error
	UnwatchAddr(a netip.Addr) error
	// BlackholeAddr reports the SYNs to a watched address that the node
	// drops (its pod terminates), until it is unwatched or watched again.
	BlackholeAddr(a netip.Addr) error
	// SetDetail turns a record per accept of a watched netns on or off;
	// ScopeAccepts reads the accepts the kernel held without records
	// (see kernel.SetDetail for the exact handover).
	SetDetail(ino uint32, on bool) error
	ScopeAccepts(ino uint32) (collector.AcceptSummary, error)
	// ProcessNetns reads every process's network namespace inode from
	// the kernel, by pid (see OpenContainerNetns).
	ProcessNetns() (map[int]uint32, error)
}

// ScopeRecord is one pod's watched kernel scopes, as a checkpoint keeps them.
type ScopeRecord struct {
	PodUID  string            `json:"pod_uid"`
	Netns   uint32            `json:"netns,omitempty"`
	Cgroups map[string]uint64 `json:"cgroups,omitempty"` // by container name
}

// Binder is the correlator's side of scope binding.
type Binder interface {
	BindNetns(podUID string, ino uint32)
	BindCgroup(podUID, container string, cgroupID uint64)
	HostNetwork(podUID string)
	// AcceptSummary takes the accepts the kernel held for a pod until its
	// termination began.
	AcceptSummary(s collector.AcceptSummary)
}

// podScope is what the kernel watches for one pod: its network namespace
// and its containers' cgroups.
type podScope struct {
	uid        string
	containers map[string]string // container name → container id
	// ips are the pod's addresses (a dual-stack pod has two) listed in the
	// kernel's local_dsts; blackholed, those of them the kernel reports
	// blackholed SYNs to.
	ips        []netip.Addr
	blackholed []netip.Addr
	netns      uint32
	netnsFile  *os.File          // held: the inode cannot be reused meanwhile
	hostNet    bool              // the pod uses the node's network namespace
	cgroups    map[string]uint64 // container name → cgroup id
	gone       time.Time         // when the API deleted the pod
	updated    time.Time         // last API update
	// terminating: the API asked for the pod's deletion; detail: its
	// netns sends a record per accept since (see detail).
	terminating bool
	detail      bool
	// starting: a new pod's startup is open (its first accepted
	// connection is needed); handed: the held accepts went to the
	// correlator (once, when it began terminating).
	starting bool
	handed   bool
}

// pending reports whether some scope of the pod is still unknown.
func (p *podScope) pending() bool {
	if p.netns == 0 || (p.netnsFile == nil && !p.hostNet) {
		return true // unknown, or restored from a checkpoint and not held yet
	}
	for name, id := range p.containers {
		if id != "" && p.cgroups[name] == 0 {
			return true
		}
	}
	return false
}

// Scopes keeps the BPF watched-scope map in step with the node's pods:
// a pod's netns and cgroups are watched from the moment its sandbox or
// containers exist (or the daemon starts) until its termination is
// complete. It is not safe for concurrent use: the daemon calls it from its
// loop goroutine.
type Scopes struct {
	kernel      Watcher
	corr        Binder
	root, proc  string
	log         zerolog.Logger
	pods        map[string]*podScope
	netnsOwner  map[uint32]string // inode → pod UID (inodes are reused)
	cgroupOwner map[uint64]string
	addrOwner   map[netip.Addr]string // pod IP → pod UID (IPs are reused)
	lastScan    time.Time
	cgroups     map[string][]FoundCgroup // by pod UID, from the last scan
	// nsFiles: the kernel cannot read process namespaces (no BPF task
	// iterator): they are read from /proc/<pid>/ns/net, which needs ptrace
	// access (CAP_SYS_PTRACE) to the pods' processes.
	nsFiles bool
	// nsProbed: the kernel was asked once whether it can.
	nsProbed bool
}

// NewScopes binds pods found under the cgroup v2 root (and /proc at proc).
func NewScopes(k Watcher, corr Binder, root, proc string, log zerolog.Logger) *Scopes {
	return &Scopes{
		kernel: k, corr: corr, root: root, proc: proc, log: log,
		pods: make(map[string]*podScope), netnsOwner: make(map[uint32]string), cgroupOwner: make(map[uint64]string),
		addrOwner: make(map[netip.Addr]string),
	}
}

// podUpdate records a pod's containers and binds what can be bound now.
func (s *Scopes) PodUpdate(p collector.Pod, now time.Time) {
	ps := s.pods[p.UID]
	if ps == nil {
		ps = &podScope{uid: p.UID, containers: map[string]string{}, cgroups: map[string]uint64{}}
		s.pods[p.UID] = ps
	}
	ps.gone = time.Time{} // listed by the API: alive (or terminating)
	ps.updated = now
	ps.terminating = ps.terminating || !p.DeletionTimestamp.IsZero()
	for _, c := range p.Containers {
		if c.ID != "" && ps.containers[c.Name] != c.ID {
			ps.containers[c.Name] = c.ID
			s.unwatchCgroup(ps, c.Name) // a restarted container has a new cgroup
		}
	}
	if addrs := p.Addrs(); len(addrs) > 0 && !slices.Equal(addrs, ps.ips) && !ps.hostNet {
		s.watchAddrs(ps, addrs)
	}
	s.blackholeAddr(ps)
	if ps.pending() {
		s.Sync(now, true)
	}
}

// podDeleted notes the API deletion (the scopes stay watched).
func (s *Scopes) PodDeleted(uid string, now time.Time) {
	if ps := s.pods[uid]; ps != nil && ps.gone.IsZero() {
		ps.gone = now
	}
}

// sync binds pending pods from a fresh cgroup scan and releases pods gone
// long ago; force skips the rescan pacing (a new container was announced).
func (s *Scopes) Sync(now time.Time, force bool) {
	for uid, ps := range s.pods {
		if !ps.gone.IsZero() && now.Sub(ps.gone) > releaseAfter {
			s.Release(uid)
		}
	}
	pending, recent := s.anyPending(now)
	every := rescanSlow
	switch {
	case force:
		every = rescanForced // a burst of updates (the first list) scans once
	case recent:
		every = rescanEvery
	}
	if !pending || now.Sub(s.lastScan) < every {
		return
	}
	s.lastScan = now
	if err := s.scan(); err != nil {
		s.log.Warn().Err(err).Msg("scanning container cgroups")
		return
	}
	for _, ps := range s.pods {
		if ps.pending() && ps.gone.IsZero() {
			s.bind(ps)
		}
	}
}

// anyPending reports whether a live pod waits for a scope, and whether one
// of those changed recently.
func (s *Scopes) anyPending(now time.Time) (pending, recent bool) {
	for _, ps := range s.pods {
		if ps.gone.IsZero() && ps.pending() {
			pending = true
			if now.Sub(ps.updated) < recentPod {
				return true, true
			}
		}
	}
	return pending, false
}

func (s *Scopes) scan() error {
	found, err := ScanContainerCgroups(s.root)
	if err != nil {
		return err
	}
	s.cgroups = make(map[string][]FoundCgroup)
	for _, f := range found {
		s.cgroups[f.PodUID] = append(s.cgroups[f.PodUID], f)
	}
	return nil
}
