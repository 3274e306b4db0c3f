// Package collector turns what a node can observe into typed Go events: kernel
// observations decoded from the eBPF ring buffer (accepts, refusals, resets,
// signals, exits, in-flight connections torn down) and API-server observations
// (pods, kubelet Events, EndpointSlice state). It does no correlation: that is
// the job of package correlate, which consumes these types.
package collector
