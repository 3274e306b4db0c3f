// Package promtest helps tests check drainwatch against real Prometheus
// tooling: a Prometheus server (Debian's package) started on loopback that
// scrapes given targets, an exact PromQL query helper, and checks that
// queries parse (promtool) and use only metrics drainwatch exports.
package promtest
