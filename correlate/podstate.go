package correlate

import (
	"net/netip"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// podState is what the correlator keeps about one pod of the node, whether
// it is terminating or not: kernel history that a termination needs from
// before it began (open listeners, recent accepts and refusals) and the
// termination itself once it has begun. Fields are exported for the JSON
// snapshot only.
type podState struct {
	Pod collector.Pod `json:"pod"`
	// Known is set by the first PodUpdate; a pod first learnt from
	// BindNetns/BindCgroup is a placeholder until then.
	Known      bool              `json:"known,omitempty"`
	Seen       time.Time         `json:"seen,omitzero"` // of the latest PodUpdate
	NetnsIno   uint32            `json:"netns,omitempty"`
	Cgroups    map[string]uint64 `json:"cgroups,omitempty"` // container name → cgroup id
	KernelSeen bool              `json:"kernel_seen,omitempty"`
	// HostNet is set for a pod in the node's network namespace: its socket
	// events cannot be told from the node's, so they are not watched.
	HostNet bool `json:"host_net,omitempty"`

	Listeners  listenerSet `json:"listeners"`
	LastAccept time.Time   `json:"last_accept,omitzero"`
	// The kernel and API streams race: a mark from the API can be processed
	// after kernel events it precedes. Accepts keeps the latest accept
	// times for endpoints_not_ready; Early keeps the latest rare events
	// (refusals, listener closes, exits...) seen while no termination was
	// open, replayed once deletion_seen is known.
	Accepts timeRing  `json:"accepts"`
	Early   eventRing `json:"early"`
	// Seeded is set once the kernel's held accepts were merged in
	// (AcceptSummary): a second reading of the same history is ignored.
	Seeded bool `json:"seeded,omitempty"`
	// NotReadySince is when the endpoint last became not ready (zero while
	// it is ready); EverPresent whether the pod was ever in a slice.
	NotReadySince time.Time `json:"not_ready_since,omitzero"`
	// NotReadyBlind: NotReadySince is only when the slice watch caught up
	// after an outage (collector.EndpointUpdate.BlindSince), not the change.
	NotReadyBlind bool `json:"not_ready_blind,omitempty"`
	EverPresent   bool `json:"ever_present,omitempty"`
	// Kubelet events that arrived before the termination began.
	Killing        time.Time `json:"killing,omitzero"`
	KillingMessage string    `json:"killing_message,omitempty"` // the latest Killing's, kept for the cause
	PrestopFailed  time.Time `json:"prestop_failed,omitzero"`
	PrestopMessage string    `json:"prestop_message,omitempty"`
	// LastEnd is when the pod's last container termination ended (its
	// container ran again): older signs of a stop were that one's.
	LastEnd time.Time `json:"last_end,omitzero"`
	// OutsideKill is the latest SIGKILL from outside the pod's containers
	// seen while no termination was open.
	OutsideKill time.Time `json:"outside_kill,omitzero"`
	// KeepAlive measures the idle timeouts of the pod's server and of the
	// pools in front of it (keepalive.go), from IdleCloses, its latest
	// idle closes; a termination's record carries a copy.
	KeepAlive  KeepAlive `json:"keep_alive,omitzero"`
	IdleCloses idleRing  `json:"idle_closes,omitzero"`

	Term *termState `json:"term,omitempty"`
	// Startup is the pod's startup while it is open (startup.go).
	Startup *startupState `json:"startup,omitempty"`
}

// termState is a termination in progress with the bookkeeping its counts
// need beyond the Termination record.
type termState struct {
	T Termination `json:"t"`
	// Start is the earliest observation that began the termination.
	Start time.Time `json:"start"`
	// Tentative: begun by a stop signal that nothing confirmed yet (no
	// Killing, deletion, kubelet verdict or exit): hidden, and dropped
	// once unconfirmed says it stopped nothing.
	Tentative bool `json:"tentative,omitempty"`
	// IDs are the pod's container ids when the termination began;
	// Restarted is when the API showed a container running under a new id
	// (or the kernel a new init's stop signal): a container termination
	// ends there.
	IDs       map[string]string `json:"ids,omitempty"`
	Restarted time.Time         `json:"restarted,omitzero"`
	// Stopped is when the API first showed the pod terminal with every
	// container terminated: a pod the kubelet stopped is done then, its
	// deletion (if any) may come much later.
	Stopped time.Time `json:"stopped,omitzero"`
	// ByExit: begun by an init's exit with no stop signal (a crash, an OOM
	// kill); OutsideKill, a SIGKILL from outside the pod's containers
	// preceded that exit (so it was not the OOM killer's).
	ByExit bool `json:"by_exit,omitempty"`
	// Container is the container whose stop began the termination (its
	// init's stop signal or exit), "" when not known.
	Container   string `json:"container,omitempty"`
	OutsideKill bool   `json:"outside_kill,omitempty"`
	StartedLate bool   `json:"started_late,omitempty"`
	// Ran is set when a container was running when the termination began:
	// a pod that never ran has nothing to observe and yields no record.
	Ran bool `json:"ran,omitempty"`
	// Unclassified counts refusals after deletion_seen while no stop signal
	// had been seen.
	Unclassified   int    `json:"unclassified,omitempty"`
	PrestopMessage string `json:"prestop_message,omitempty"`
	// Accepts logs accept times while endpoints_not_ready is unknown.
	Accepts *acceptLog `json:"accepts,omitempty"`
	// EndpointsBlind: the endpoint became not ready while the API side was
	// not watched; GoneBy, when the pod's deletion was received after an
	// outage (pod_gone unknown, the termination completes on it).
	EndpointsBlind bool      `json:"endpoints_blind,omitempty"`
	GoneBy         time.Time `json:"gone_by,omitzero"`
	// AcceptedAfterStop holds cookies accepted after the stop signal, so an
	// in-flight close of any other connection proves it was open at the
	// stop signal. Capped at maxTrackedCookies.
	AcceptedAfterStop map[uint64]bool `json:"accepted_after_stop,omitempty"`
	// Settled holds cookies already counted as killed or reset, so a
	// connection (a multiplexed one too) counts once.
	Settled map[uint64]bool `json:"settled,omitempty"`
	// ResetRemotes holds the clients whose connections the shutdown reset,
	// so a client's later segments meeting no socket count once.
	ResetRemotes map[netip.AddrPort]bool `json:"reset_remotes,omitempty"`
	// Blackholes are the blackholed attempts (blackhole.go), by client
	// socket and pod port, with their first drop; Refused the latest
	// refused ones (at most recentRefused), which their flooded copies,
	// microseconds later, must not count; BlackholeOverflow the attempts
	// counted past the bound.
	Blackholes        map[blackholeKey]time.Time `json:"blackholes,omitempty"`
	Refused           []blackholeKey             `json:"refused,omitempty"`
	RefusedNext       int                        `json:"refused_next,omitempty"` // Refused's oldest slot once full
	BlackholeOverflow int                        `json:"blackhole_overflow,omitempty"`
	// StopContainer is the container whose init got the stop signal ("" when
	// its cgroup was not bound), for the API cross-check.
	StopContainer string `json:"stop_container,omitempty"`
	// EarlyOverflow is set when events that may belong to the termination
	// were dropped from the pod's Early ring before it began.
	EarlyOverflow bool            `json:"early_overflow,omitempty"`
	ExitedPIDs    map[uint32]bool `json:"exited_pids,omitempty"`
	// RecentExits are the latest process exits (death.go); ServerExit the
	// one whose exit first tore down a request in flight.
	RecentExits []procExit      `json:"recent_exits,omitempty"`
	ServerExit  *procExit       `json:"server_exit,omitempty"`
	InitExited  map[string]bool `json:"init_exited,omitempty"` // container name → exited
	// SawInitExit is set by any container init exit, attributed to a
	// container or not.
	SawInitExit bool `json:"saw_init_exit,omitempty"`
	// Peers tallies client connections by peer address for
	// RoutingSources (peers.go).
	Peers *peerTally `json:"peers,omitempty"`
}

// maxTrackedCookies bounds the per-termination cookie and PID sets: a busy
// pod that keeps accepting through a long drain must not grow memory (and
// the persisted snapshot) without end. Past it, connections accepted after
// the stop signal are no longer told apart and inflight_at_stop_signal may
// over-count; the exact fix is an accept time on conn_closed_inflight.
const maxTrackedCookies = 8192

// listenerSet tracks the pod's open listening sockets by cookie. Complete
// says every open listener is in Open: false when the daemon may have
// missed a listen_open (it started after the pod's containers, or lost
// events), in which case the last listen_close of the termination stands
// for the listener closing.
type listenerSet struct {
	Open     map[uint64]bool `json:"open,omitempty"`
	Complete bool            `json:"complete,omitempty"`
	// Info is what each open listener's listen event said: its port, its
	// container and whether it is bound to loopback. Outer holds the ports
	// that accepted a connection from outside the pod (at a pod address).
	// Both only matter to a pod with several listeners: which of them the
	// clients reach (a sidecar's, while the app behind it sees only
	// loopback) and whose container each is.
	Info  map[uint64]listenerInfo `json:"info,omitempty"`
	Outer map[uint16]bool         `json:"outer,omitempty"`
}

// listenerInfo is one listener as its listen event named it.
type listenerInfo struct {
	Port      uint16 `json:"port"`
	Container string `json:"container,omitempty"`
	Loopback  bool   `json:"loopback,omitempty"`
}

// maxListenerInfo bounds Info (a server opening listeners in a loop).
const maxListenerInfo = 64

func (l *listenerSet) open(cookie uint64, info listenerInfo) {
	if l.Open == nil {
		l.Open = make(map[uint64]bool)
	}
	l.Open[cookie] = true
	if l.Info == nil {
		l.Info = make(map[uint64]listenerInfo)
	}
	if len(l.Info) < maxListenerInfo {
		l.Info[cookie] = info
	}
}

// close removes a listener and reports what its listen event said and
// whether no listener the clients reach is left open (serving: see
// serves), the last one included.
func (l *listenerSet) close(cookie uint64) (info listenerInfo, noneServing bool) {
	info = l.Info[cookie]
	if !l.Open[cookie] {
		l.Complete = false
	}
	delete(l.Open, cookie)
	delete(l.Info, cookie)
	if !l.Complete {
		return info, false
	}
	if len(l.Open) == 0 {
		return info, true
	}
	if !l.serves(info) {
		return info, false // an inner listener's close: the clients' listener is untouched
	}
	return info, !l.anyServing()
}

// anyServing says whether a listener the clients reach is open.
func (l *listenerSet) anyServing() bool {
	for c := range l.Open {
		if l.serves(l.Info[c]) {
			return true
		}
	}
	return false
}

// serves says whether a listener is one the pod's clients reach: not
// bound to loopback and, once any port has accepted a connection from
// outside the pod, one of those ports. A mesh's application behind the
// proxy listens on the wildcard too, but only its proxy's loopback
// connections reach it.
func (l *listenerSet) serves(info listenerInfo) bool {
	if info.Loopback {
		return false
	}
	return len(l.Outer) == 0 || info.Port == 0 || l.Outer[info.Port]
}

// accepted notes a port that accepted a connection from outside the pod
// (called for a pod of several containers or listeners only).
func (l *listenerSet) accepted(port uint16) {
	if l.Outer[port] {
		return
	}
	if l.Outer == nil {
		l.Outer = make(map[uint16]bool)
	}
	if len(l.Outer) < maxListenerInfo {
		l.Outer[port] = true
	}
}

const (
	sigkill = 9
	sigterm = 15
)
