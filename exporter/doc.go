// Package exporter is drainwatch's output side: the Prometheus metrics of the
// contract of docs/design.md, the HTTP API with per-pod timelines, the timeline page,
// and Kubernetes Events for terminations that lost traffic. It only reads
// correlate.Termination records; it never changes them.
package exporter

// Version is drainwatch's version, set at build time with
// -ldflags "-X github.com/drainwatch/drainwatch/exporter.Version=...".
var Version = "dev"
