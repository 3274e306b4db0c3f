package collector

import "time"

// How long a deleted pod still matters is decided here, once, and every
// stage derives its timer from PodTail:
//
//   - correlate: a termination stays open PodTail after the pod is gone
//     from the API, for the kernel's last events (correlate.Config's
//     KernelTail default).
//   - collector/kube: a deleted pod's Event and EndpointSlice watches
//     linger APILinger past its grace period, outliving the termination so
//     that late API updates still reach it (kube.DefaultLinger).
//   - collector/node: the kernel stops watching a pod's scopes when its
//     termination completes; ScopeRelease after the deletion is the
//     backstop for a termination that never opened.
const (
	PodTail      = 5 * time.Second
	APILinger    = 6 * PodTail   // 30 s
	ScopeRelease = 120 * PodTail // 10 min
)
