// Package collector holds the vocabulary every stage shares: the typed
// kernel observation (Event, EventType, CloseCause, InflightKind, Comm,
// SignalResult) and the API-side observations (Pod, PodUpdate, PodDeleted,
// KubeletEvent, EndpointUpdate). It has no dependency on the kernel or the
// API server: the sub-packages that produce these values do.
//
//   - collector/kernel loads the eBPF probes and decodes the ring buffer
//     into Events.
//   - collector/kube watches the API server (pods, kubelet Events,
//     EndpointSlices) and emits the pod types.
//   - collector/node reads the node itself (cgroups, container network
//     namespaces) and binds each pod's scopes in the kernel.
//
// Correlation is the job of package correlate, which imports this package
// only.
package collector
