// Package kube is the API-server side of the collector: informers on this
// node's pods, kubelet Events and the EndpointSlices selecting them, with
// owners resolved to a rollout identity and objects shrunk to what the
// correlator needs, delivered as collector pod types to an APISink.
package kube
