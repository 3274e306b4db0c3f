package collector

import (
	"net/netip"
	"strings"
	"time"
)

// Workload is a pod's rollout identity, the label set of every per-rollout
// metric: Kind is Deployment, StatefulSet, DaemonSet, ReplicaSet, Job or none;
// Revision is the ReplicaSet's deployment.kubernetes.io/revision, or the
// controller-revision-hash of StatefulSet and DaemonSet pods.
type Workload struct {
	Namespace string `json:"namespace"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Revision  string `json:"revision"`
}

// Container is one container of a pod as the API reports it.
type Container struct {
	Name string `json:"name"`
	// StopSignal is lifecycle.stopSignal as a signal number; 0 means SIGTERM.
	StopSignal uint32 `json:"stopSignal,omitempty"`
	// ID is the runtime's container id without the "containerd://" prefix
	// (64 hex characters); empty until the container has started.
	ID string `json:"id,omitempty"`
	// ExitCode and Reason are set once the container has terminated.
	Terminated bool   `json:"terminated,omitempty"`
	ExitCode   int32  `json:"exitCode,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// LastReason is lastState.terminated.reason: why the previous
	// container of a restarted one ended (OOMKilled, Error, Completed).
	LastReason string `json:"lastReason,omitempty"`
	// Sidecar marks a native sidecar: an init container with
	// restartPolicy Always, which runs beside the main containers and is
	// stopped after they have exited.
	Sidecar bool `json:"sidecar,omitempty"`
}

// Pod is the part of a pod drainwatch keeps: what attribution and the
// termination timeline need, nothing else (the informer's transform drops
// the rest).
type Pod struct {
	UID       string `json:"uid"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Node      string `json:"node"`
	// IP is status.podIP, the pod's primary address; IPs is status.podIPs
	// (a dual-stack pod's two addresses, the primary first), empty when the
	// pod has one.
	IP       netip.Addr   `json:"ip"`
	IPs      []netip.Addr `json:"ips,omitempty"`
	Workload Workload     `json:"workload"`
	// Created is metadata.creationTimestamp.
	Created time.Time `json:"created,omitzero"`
	// GracePeriod is spec.terminationGracePeriodSeconds (default 30 s).
	GracePeriod time.Duration `json:"gracePeriod"`
	HasPreStop  bool          `json:"hasPreStop,omitempty"`
	// HTTP2 is set when a container declares a port named for HTTP/2
	// (HTTP2PortName): the daemon follows HTTP/2 streams while such a pod
	// is on the node (--http2-tracking=auto).
	HTTP2      bool        `json:"http2,omitempty"`
	Containers []Container `json:"containers,omitempty"`
	Ready      bool        `json:"ready"`
	// Terminal: the pod's phase is Failed or Succeeded (nothing restarts).
	// The kubelet writes it before it stops the containers of a pod it
	// evicts; with every container terminated the pod is done, deleted or
	// not.
	Terminal bool `json:"terminal,omitempty"`

	// DeletionTimestamp and DeletionGracePeriod are set once the pod is
	// being deleted; DeletionTimestamp − DeletionGracePeriod is the time the
	// delete was requested.
	DeletionTimestamp   time.Time     `json:"deletionTimestamp,omitzero"`
	DeletionGracePeriod time.Duration `json:"deletionGracePeriod,omitempty"`

	// Stop is what the API says about why the pod stops.
	Stop StopEvidence `json:"stop,omitzero"`
}

// StopEvidence is what the API says about why a pod stops: the cause of
// its termination (correlate's cause rules) is read from it.
type StopEvidence struct {
	// Disruption is the reason of the pod's DisruptionTarget condition
	// (PreemptionByScheduler, EvictionByEvictionAPI, DeletionByTaintManager,
	// DeletionByPodGC, TerminationByKubelet) when it is true.
	Disruption string `json:"disruption,omitempty"`
	// Reason and Message are status.reason and status.message (the
	// kubelet's Evicted, Preempting, or its node-shutdown message).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// OwnerRevision is the owner's current revision when the pod's deletion
	// was seen (a Deployment's or Argo Rollout's revision annotation, a
	// StatefulSet's updateRevision); empty when unknown.
	OwnerRevision string `json:"ownerRevision,omitempty"`
}

// PodUpdate is a pod added or changed, as the daemon saw it at Seen.
type PodUpdate struct {
	Seen time.Time
	Pod  Pod
}

// PodDeleted is a pod removed from the API.
type PodDeleted struct {
	Seen time.Time
	UID  string
	// BlindSince is set when the pod watch delivered the deletion while
	// catching up after failing since then: the pod went away somewhere
	// in [BlindSince, Seen]. Zero when the watch was healthy.
	BlindSince time.Time
}

// KubeletEvent is a kubelet Event about a pod: Killing, FailedPreStopHook.
type KubeletEvent struct {
	PodUID  string
	Reason  string
	Message string
	// Time is the Event's own time (eventTime, else lastTimestamp).
	Time time.Time
}

// EndpointUpdate is the state of one pod's endpoint across the
// EndpointSlices of the services selecting it, as of Seen. Present is false
// once the endpoint is gone from every slice.
type EndpointUpdate struct {
	Seen        time.Time
	PodUID      string
	Present     bool
	Ready       bool
	Serving     bool
	Terminating bool
	// TriggerTime is the slice's endpoints.kubernetes.io/last-change-trigger-time.
	TriggerTime time.Time
	// BlindSince is set when the slice watch delivered the change while
	// catching up after failing since then: the change happened somewhere
	// in [BlindSince, Seen]. Zero when the watch was healthy.
	BlindSince time.Time
}

// TrimContainerID strips the runtime prefix of a containerStatuses[].containerID
// ("containerd://<id>", "cri-o://<id>").
func TrimContainerID(id string) string {
	if i := strings.Index(id, "://"); i >= 0 {
		return id[i+3:]
	}
	return id
}

// HTTP2PortName reports whether a container port's name declares HTTP/2 by
// Istio's port-naming convention (<protocol>[-<suffix>]): grpc, grpc-web,
// http2, or h2c.
func HTTP2PortName(name string) bool {
	for _, p := range []string{"grpc", "h2c", "http2"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Addrs returns every address of the pod: status.podIPs, or status.podIP
// alone (a single-stack pod, a record written before podIPs were kept).
func (p *Pod) Addrs() []netip.Addr {
	if len(p.IPs) > 0 {
		return p.IPs
	}
	if p.IP.IsValid() {
		return []netip.Addr{p.IP}
	}
	return nil
}
