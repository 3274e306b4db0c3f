// Package bench measures what drainwatch costs a node, as deployed: the
// real `drainwatch run` binary on a testenv node next to a pod running
// Debian's nginx, loaded by Debian's wrk from the fabric namespace. Modes
// are interleaved round by round (no drainwatch; drainwatch with nothing of
// the server's watched; watching the server's pod; the server's pod
// terminating) so that the machine's drift hits every mode alike, and each
// mode is reported as the median and spread over rounds of its ratio to
// the round's run without drainwatch. It also measures the daemon's
// resident memory with 110 and 250 pods on its node. `make bench` runs it
// through testenv/cmd/bench.
package bench
