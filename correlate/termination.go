// Package correlate joins kernel events and API events into one Termination
// per pod: the marks of its timeline, the exact counts of docs/design.md, derived
// durations and diagnoses. It is pure logic: no I/O, no clocks, no goroutines;
// time comes only from the events it is fed.
package correlate

import (
	"net/netip"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// Marks are the wall-clock times of a termination's timeline. A zero time is
// a mark not (yet) observed.
type Marks struct {
	DeleteRequested   time.Time `json:"delete_requested,omitzero"`
	DeletionSeen      time.Time `json:"deletion_seen,omitzero"`
	Killing           time.Time `json:"killing,omitzero"`
	PrestopFailed     time.Time `json:"prestop_failed,omitzero"`
	StopSignal        time.Time `json:"stop_signal,omitzero"`
	EndpointsNotReady time.Time `json:"endpoints_not_ready,omitzero"`
	ListenerClosed    time.Time `json:"listener_closed,omitzero"`
	LastAccept        time.Time `json:"last_accept,omitzero"`
	Sigkill           time.Time `json:"sigkill,omitzero"`
	Exit              time.Time `json:"exit,omitzero"`
	PodGone           time.Time `json:"pod_gone,omitzero"`
}

// Counts are the exact counts of docs/design.md, compared in tests with what the
// clients saw.
type Counts struct {
	RefusedAfterSigterm     int `json:"refused_after_sigterm"`
	RefusedBeforeSigterm    int `json:"refused_before_sigterm"`
	RequestsKilledBySigkill int `json:"requests_killed_by_sigkill"`
	// InflightAtStopSignal is a lower bound: connections open at the stop
	// signal that were later torn down with a request in flight. Requests
	// in flight at the stop signal that then completed leave no kernel
	// event drainwatch reads.
	InflightAtStopSignal           int `json:"inflight_at_stop_signal"`
	AcceptedAfterEndpointsNotReady int `json:"accepted_after_endpoints_not_ready"`
	// RequestsKilledAtExit counts accepted connections with a request or
	// stream in flight (the rule of RequestsKilledBySigkill) torn down
	// because their process exited by anything other than SIGKILL: the
	// default action of the stop signal or of another signal, a crash, or
	// the process's own exit with requests open (a shutdown timeout
	// shorter than the longest request). Termination.Death says how it
	// died.
	RequestsKilledAtExit int `json:"requests_killed_at_exit"`
	// ConnectionsResetAtExit counts what an exit tore down that was not in
	// flight: RSTs sent by a process of the pod after its exit, and
	// connections still in an accept queue when their process exited.
	ConnectionsResetAtExit int `json:"connections_reset_at_exit"`
	// ConnectionsResetAtShutdown counts connections the shutdown itself
	// reset or dropped while the process was alive: accepted connections
	// still in the accept queue reset when the listener closed, handshakes
	// the closed listener left half-open (the client's ACK meets no
	// socket), and connections with a request in flight that the server
	// closed or reset before answering. Clients see ECONNRESET or an empty
	// reply.
	ConnectionsResetAtShutdown int `json:"connections_reset_at_shutdown"`
	// RequestsResetOnReusedConnections counts requests that arrived on a
	// keep-alive connection the pod's server had already closed (idle
	// timeout, or the shutdown closing idle connections) and were answered
	// with a RST: an upstream's pooled connection, a 502 at a proxy. One
	// per connection; never one counted in ConnectionsResetAtShutdown or
	// RequestsKilledBySigkill. Termination.ReuseResets has the RST reasons.
	RequestsResetOnReusedConnections int `json:"requests_reset_on_reused_connections"`
	// StreamsKilledBySigkill is the part of RequestsKilledBySigkill whose
	// in-flight work was an open stream (an HTTP/2 or gRPC stream the server
	// had not ended) rather than an unanswered request.
	StreamsKilledBySigkill int `json:"streams_killed_by_sigkill"`
	// ProbeRefused counts connection attempts by this node's kubelet
	// (readiness probes keep running until the container exits) refused
	// during the termination. They are not client traffic: they are never
	// in RefusedAfterSigterm or RefusedBeforeSigterm and never move
	// LastConnAttempt or the routing lag.
	ProbeRefused int `json:"probe_refused"`
	// ConnectionsBlackholed counts connection attempts to the pod's
	// address that the node's kernel dropped before they reached the pod,
	// because its network was gone (blackhole.go): one per client socket,
	// the kubelet's probes excluded. Clients see a connect timeout or "no
	// route to host". Counted where the node's kernel drops them (the
	// probe "blackhole", Linux >= 5.17): see docs/limits.md for datapaths
	// where no kernel of the node does.
	ConnectionsBlackholed int `json:"connections_blackholed"`
	// RefusedInsidePod counts connections a container of the pod made to
	// another over loopback that were refused during the termination: a
	// sidecar proxy forwarding to an application whose listener had closed
	// (Termination.RefusedInsidePorts names the ports). Each is a request
	// the proxy could not forward (its client got the proxy's error, or the
	// proxy retried): never a client's refusal, so never in
	// RefusedAfterSigterm or RefusedBeforeSigterm.
	RefusedInsidePod int `json:"refused_inside_pod,omitempty"`
}

// Diagnosis codes (docs/design.md, Diagnoses). Each Diagnosis carries a one-line explanation
// with the numbers behind it and, where there is one, the fix.
const (
	DiagListenerClosedEarly = "listener_closed_before_routing_converged"
	DiagNoDrainDelay        = "no_drain_delay"
	DiagStopSignalIgnored   = "stop_signal_ignored"
	DiagGraceExceeded       = "grace_period_exceeded"
	DiagRequestsKilled      = "requests_killed"
	DiagPrestopFailed       = "prestop_hook_failed"
	DiagBudgetTooSmall      = "budget_too_small"
	DiagShutdownResets      = "connections_reset_at_shutdown"
	DiagResetAtExit         = "connections_reset_at_exit"
	DiagResetOnReuse        = "requests_reset_on_reused_connections"
	DiagStreamsKilled       = "streams_killed"
	DiagStopSignalMismatch  = "stop_signal_mismatch"
	DiagLivenessRestart     = "liveness_restart"
	DiagOOMKilled           = "oom_killed"
	DiagContainerCrashed    = "container_crashed"
	DiagStopSignalKills     = "stop_signal_kills_server"
	DiagExitedInflight      = "exited_with_requests_in_flight"
	DiagCrashedDuringDrain  = "crashed_during_drain"
	DiagBlackholed          = "connections_blackholed"
	DiagRefusedInsidePod    = "refused_inside_pod"
	DiagClean               = "clean"
)

// Diagnosis is one finding about a termination.
type Diagnosis struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// ConnPoint is one connection attempt on the pod's timeline (for the
// timeline page): an accept or a refusal.
type ConnPoint struct {
	Time    time.Time `json:"t"`
	Refused bool      `json:"refused,omitempty"`
	// Probe marks an attempt by this node's kubelet (a probe), drawn apart
	// from client traffic.
	Probe bool `json:"probe,omitempty"`
	// Blackholed marks the drop of a blackholed attempt (at the drop's
	// time, see Termination.LastBlackholed).
	Blackholed bool `json:"blackholed,omitempty"`
}

// Source is one node-local task (by command name) that connected to the pod
// during its termination: the kubelet's probes, a node-local proxy, a
// scraper. Probe sources are kept out of the client counts; the others are
// client traffic, listed by source so that a timeline says who kept sending.
type Source struct {
	Comm     string `json:"comm"`
	Probe    bool   `json:"probe,omitempty"`
	Accepted int    `json:"accepted"`
	Refused  int    `json:"refused"`
}

// Termination is everything drainwatch knows about one pod's termination.
type Termination struct {
	PodUID string `json:"pod_uid"`
	// Pod is the pod's name; its namespace is Workload.Namespace.
	Pod string `json:"pod"`
	// Container names the container of a container's termination (a
	// liveness kill, an OOM kill, a crash: the pod did not stop, the
	// kubelet restarted the container); "" for the pod's own.
	Container string     `json:"container,omitempty"`
	Node      string     `json:"node"`
	PodIP     netip.Addr `json:"pod_ip"`
	// PodIPs are a dual-stack pod's addresses (PodIP first); empty for a
	// single-stack pod.
	PodIPs   []netip.Addr       `json:"pod_ips,omitempty"`
	Workload collector.Workload `json:"workload"`
	// GracePeriod is the grace the deletion was given.
	GracePeriod time.Duration `json:"grace_period"`

	Marks  Marks  `json:"marks"`
	Counts Counts `json:"counts"`
	// ReuseResets details Counts.RequestsResetOnReusedConnections.
	ReuseResets ReuseResets `json:"reuse_resets,omitzero"`
	// KeepAlive is the pod's server's idle timeout and the pools' in front
	// of it as its idle closes and the resets on reuse after them measured
	// them, over the pod's life until the stop signal (keepalive.go).
	KeepAlive KeepAlive `json:"keep_alive,omitzero"`

	ExitCode   int32  `json:"exit_code"`
	ExitSignal uint32 `json:"exit_signal,omitempty"`
	// Death is how the server ended (death.go): the process whose exit
	// killed requests in flight, else the container's init.
	Death Death `json:"death,omitzero"`
	// StopSignal is the stop signal's number and StopSignalTarget the
	// command name of the init it was sent to (a shell there explains a
	// stop_signal_ignored).
	StopSignal       uint32 `json:"stop_signal,omitempty"`
	StopSignalTarget string `json:"stop_signal_target,omitempty"`
	// StopSignalAPI is the stop signal the API names for the pod's
	// containers (lifecycle.stopSignal, or status stopSignal with the
	// ContainerStopSignals gate), 0 when it names none. It is a cross-check
	// of the signal seen in the kernel, never a substitute.
	StopSignalAPI uint32 `json:"stop_signal_api,omitempty"`
	// LastConnAttempt is the last connection attempt (accepted or refused)
	// of the termination: routing_lag_observed ends there. Connections may
	// be truncated; this is not.
	LastConnAttempt time.Time `json:"last_conn_attempt,omitzero"`
	// LastBlackholed is the latest drop of a blackholed attempt. A drop
	// can come later than its SYN (a neighbour's resolution fails up to
	// 3 s after the first packet it queued), so it is not a connection
	// attempt's time and never moves LastConnAttempt or the routing lag.
	LastBlackholed time.Time `json:"last_blackholed,omitzero"`

	// Cause is why the pod stopped (Causes(): rollout, scale_down,
	// eviction…), CauseEvidence what says so (a DisruptionTarget reason,
	// the owner's revisions, a Killing message).
	Cause         string `json:"cause,omitempty"`
	CauseEvidence string `json:"cause_evidence,omitempty"`

	Diagnoses []Diagnosis `json:"diagnoses,omitempty"`
	// Outcome is the terminations_total label: clean, refused, killed
	// (by SIGKILL or at exit), refused_and_killed, blackholed, reset, partial.
	Outcome string `json:"outcome,omitempty"`

	// Complete is set once no more events can change the record (the pod is
	// gone from the API and its kernel tail has been waited for).
	Complete bool `json:"complete"`
	// Partial is set when the kernel view is incomplete (the daemon started
	// after the stop signal, a probe was unavailable, events were lost); the
	// reasons say which. A partial termination is never reported as clean.
	Partial        bool     `json:"partial,omitempty"`
	PartialReasons []string `json:"partial_reasons,omitempty"`

	// Connections are the accepts and refusals seen during the termination,
	// bounded (the oldest are kept) for the timeline page.
	Connections []ConnPoint `json:"connections,omitempty"`
	// Sources are the node-local tasks that connected during the
	// termination, bounded, in order of first sight.
	Sources []Source `json:"sources,omitempty"`
	// Listeners are the listener closes of a pod of several containers
	// during the termination, in order, bounded: whose container each was,
	// its port and whether it was one only the pod itself reached (Inner: a
	// loopback backend behind a sidecar). Empty for a pod of one container.
	Listeners []ListenerClose `json:"listeners,omitempty"`
	// RefusedInsidePorts details Counts.RefusedInsidePod by port, bounded.
	RefusedInsidePorts []PortCount `json:"refused_inside_ports,omitempty"`
	// RoutingSources are the traffic sources that still sent at or after
	// endpoints_not_ready, slowest first, bounded (routingsources.go).
	RoutingSources []RoutingSource `json:"routing_sources,omitempty"`
}

// ListenerClose is one listener of a pod of several containers closing.
type ListenerClose struct {
	Container string    `json:"container,omitempty"`
	Port      uint16    `json:"port"`
	Inner     bool      `json:"inner,omitempty"`
	At        time.Time `json:"at"`
}

// PortCount is a count on one port, with the time of the last one.
type PortCount struct {
	Port  uint16    `json:"port"`
	Count int       `json:"count"`
	Last  time.Time `json:"last,omitzero"`
}

// maxListenerCloses bounds Termination.Listeners and RefusedInsidePorts.
const maxListenerCloses = 8
