// Package promtest runs drainwatch against real Prometheus tooling: a
// Prometheus server (Debian's package) on loopback that scrapes given
// targets, with an exact PromQL query helper; and checks that queries parse
// (promtool) and use only metrics drainwatch exports. Tests start the
// server with Start, which stops it at the test's end; programs such as the
// lab (testenv/lab, `make lab`) use Launch and Stop.
package promtest
