package correlate

import (
	"net/netip"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// The startup side of a rollout (docs/design.md, "The startup side of a
// rollout"): a pod first seen not Ready and not deleting gets a startup
// record. Its counts start when the daemon saw the pod become Ready (the
// condition's own time has a one-second precision) and last for
// Config.StartupWindow; refusals before Ready that are client traffic are
// counted apart. A deletion ends the window early: from then on the
// refusals are the termination's.

// Startup is one new pod's start on the node.
type Startup struct {
	PodUID    string `json:"pod_uid"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	// Node is the pod's node (empty in a record of a daemon before this
	// field: the daemon that answered is on it).
	Node     string             `json:"node,omitempty"`
	Workload collector.Workload `json:"workload"`
	Marks    StartupMarks       `json:"marks"`
	Counts   StartupCounts      `json:"counts"`
	// Window is Config.StartupWindow when the record began.
	Window time.Duration `json:"window"`
	// ReadyToFirstAccept is FirstAccept − Ready, when both are known.
	ReadyToFirstAccept time.Duration `json:"ready_to_first_accept,omitempty"`
	// Listeners are the ports the pod first listened on, with when
	// (bounded by maxStartupPorts); RefusedPorts the ports client SYNs
	// were refused on after Ready.
	Listeners    []PortMark `json:"listeners,omitempty"`
	RefusedPorts []uint16   `json:"refused_ports,omitempty"`
	// Resets are the first resets after Ready (bounded by
	// maxStartupPorts): when, the pod's port, the kernel's RST reason and
	// whether a socket sent it (else it answered a segment no socket
	// wanted).
	Resets    []ResetMark `json:"resets,omitempty"`
	Diagnoses []Diagnosis `json:"diagnoses,omitempty"`
	// NetnsBound: the kernel watches the pod's network namespace (its
	// events count from then on); a startup never bound is partial.
	NetnsBound     bool     `json:"netns_bound,omitempty"`
	Partial        bool     `json:"partial,omitempty"`
	PartialReasons []string `json:"partial_reasons,omitempty"`
	Complete       bool     `json:"complete,omitempty"`
}

// StartupMarks are a startup's marks. Created is the pod's
// creationTimestamp; ContainerStarted and Ready the first pod update the
// daemon saw with a container id and with the Ready condition true;
// FirstListener and FirstAccept (the first client connection accepted at
// or after Ready) come from the kernel; WindowEnd is Ready + the window, or
// the deletion when it came first.
type StartupMarks struct {
	Created          time.Time `json:"created,omitzero"`
	ContainerStarted time.Time `json:"container_started,omitzero"`
	FirstListener    time.Time `json:"first_listener,omitzero"`
	Ready            time.Time `json:"ready,omitzero"`
	FirstAccept      time.Time `json:"first_accept,omitzero"`
	WindowEnd        time.Time `json:"window_end,omitzero"`
}

// StartupCounts are a startup's counts (docs/design.md, Counts).
type StartupCounts struct {
	RefusedBeforeReady int `json:"refused_before_ready"`
	RefusedAfterReady  int `json:"refused_after_ready"`
	ResetAfterReady    int `json:"reset_after_ready"`
	// ProbeRefused are the kubelet's own connections refused, kept out of
	// the client counts, before or after Ready.
	ProbeRefused int `json:"probe_refused"`
}

// ResetMark is one reset of a startup.
type ResetMark struct {
	At     time.Time `json:"at"`
	Port   uint16    `json:"port"`
	Reason uint32    `json:"reason"`
	Socket bool      `json:"socket,omitempty"`
}

// PortMark is a port and when it first listened.
type PortMark struct {
	Port uint16    `json:"port"`
	At   time.Time `json:"at"`
}

// startupState is a startup in progress: the record and, until Ready is
// known, the kernel's client events not classified yet. The kernel and API
// streams race: a refusal sent after the daemon saw Ready may be processed
// before that pod update, so each is held until Ready says which side of
// it it was.
type startupState struct {
	S       Startup        `json:"s"`
	Pending []pendingEvent `json:"pending,omitempty"`
	// Settled holds reset connections (cookies) counted once, Remotes the
	// clients whose segments met no socket (a RST without a socket names
	// no cookie): each connection counts once.
	Settled map[uint64]bool         `json:"settled,omitempty"`
	Remotes map[netip.AddrPort]bool `json:"remotes,omitempty"`
	// Clients and ClientRemotes are the connections the pod accepted from
	// clients (not the kubelet's probes), by cookie and by client address:
	// only their resets are client connections reset.
	Clients       map[uint64]bool         `json:"clients,omitempty"`
	ClientRemotes map[netip.AddrPort]bool `json:"client_remotes,omitempty"`
}

// pendingEvent is a client event before Ready was known.
type pendingEvent struct {
	Time   time.Time           `json:"t"`
	Type   collector.EventType `json:"type"`
	Port   uint16              `json:"port,omitempty"`
	Reason uint32              `json:"reason,omitempty"`
	Socket bool                `json:"socket,omitempty"`
}

const (
	// maxPending bounds the events held before Ready: past it, a refusal
	// counts as before Ready and the record is partial.
	maxPending = 4096
	// maxStartupPorts bounds Listeners and RefusedPorts.
	maxStartupPorts = 16
	// maxStartups bounds the startups in progress: a node holds ~110 pods.
	maxStartups = 1024
	// startupSettle is how long after the window's end a startup waits for
	// the kernel events of its last moments before it is complete.
	startupSettle = 2 * time.Second
)

// Partial reasons of a startup.
const (
	StartupPendingOverflow = "pending_overflow"
	StartupNetnsNotBound   = PartialNetnsUnbound
	StartupEventsLost      = "events_lost"
)
