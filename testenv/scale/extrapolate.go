package scale

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// The cluster the extrapolation is for: the Kubernetes scalability limits.
const (
	targetNodes       = 5000
	targetPodsPerNode = 110
)

// growth says how one resource's bytes per daemon grow from the measured
// cluster to the target one: with the pods on the node (local) or with
// every pod of the cluster (cluster-wide).
type growth struct {
	resource string
	index    int // in resources
	local    bool
}

// scaling of each design: what drainwatch scopes to the node grows with the
// node's pods; what the naive design watches cluster-wide grows with the
// cluster's pods, on every node.
var scaling = map[Design][]growth{
	Scoped: {{"pods", 0, true}, {"services", 1, true}, {"endpointslices", 2, true}, {"events", 3, true}, {"replicasets", 4, true}},
	Naive:  {{"pods", 0, true}, {"endpointslices", 2, false}, {"events", 3, false}},
}

// Extrapolation scales the measured per-daemon bytes to 5,000 nodes x 110
// pods, a rollout restart of every pod, services of the same size.
func (r Report) Extrapolation() string {
	n := float64(r.Config.Nodes)
	local := targetPodsPerNode / (float64(r.Pods) / n)           // growth of the node's pods
	cluster := targetNodes * targetPodsPerNode / float64(r.Pods) // growth of the cluster's pods
	var b strings.Builder
	fmt.Fprintf(&b, "Extrapolation to %d nodes x %d pods (%d pods), one rollout restart of every pod, services of %d pods as measured.\n",
		targetNodes, targetPodsPerNode, targetNodes*targetPodsPerNode, r.podsPerDeployment())
	fmt.Fprintf(&b, "Per daemon: what is scoped to the node x %.1f (its pods: %.0f -> %d), what is cluster-wide x %.0f (the cluster's pods).\n\n",
		local, float64(r.Pods)/n, targetPodsPerNode, cluster)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "design\tresource\tmeasured KiB/daemon\tgrows with\t5,000 nodes: MiB/daemon\t5,000 nodes: GiB total\t")
	for _, res := range r.Results {
		r.extrapolateDesign(tw, res, local, cluster)
	}
	_ = tw.Flush()
	b.WriteString(extrapolationNotes)
	return b.String()
}

func (r Report) extrapolateDesign(tw *tabwriter.Writer, res Result, local, cluster float64) {
	if res.Daemons == 0 {
		return
	}
	var sum float64
	for _, g := range scaling[res.Design] {
		per := float64(res.During.BodyBytes[g.index]) / float64(res.Daemons)
		f, how := cluster, "cluster's pods"
		if g.local {
			f, how = local, "node's pods"
		}
		sum += per * f
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\t%.1f\t%.1f\t\n", res.Design, g.resource, per/1024, how,
			per*f/(1<<20), per*f*targetNodes/(1<<30))
	}
	fmt.Fprintf(tw, "%s\tall\t\t\t%.1f\t%.1f\t\n", res.Design, sum/(1<<20), sum*targetNodes/(1<<30))
}

const extrapolationNotes = `
What is not linear in the nodes:
- EndpointSlices (scoped): a daemon follows the services with a pod on its node, so its slice traffic
  grows with the size of those services (each slice update of a service goes to every node hosting one
  of its pods), not with the cluster. Scaling it with the node's pods assumes services of the measured
  size; a service of thousands of pods costs each of its nodes its whole churn, as in the naive design.
  Each service that comes to select a local pod gets its own slice watch (one list of its slices,
  "EndpointSlice watches started" in the table); the other services' watches go on.
- EndpointSlices and Events (naive): every daemon receives every change in the cluster, so the total is
  nodes x cluster pods: quadratic in cluster size (x5,000 per change at 5,000 nodes).
- Events have no watch cache in the API server (watch_cache_capacity lists none): each Event watch is an
  etcd watch, and each list of them an etcd range over the namespace's Events. Scoped holds one list and
  one watch per terminating local pod, for its grace + 30 s; naive one watch per node, always.
- Watches held: scoped is 1 (pods) + 1 per namespace with local pods (Services) + 1 per service selecting
  local pods (EndpointSlices) + 1 per terminating local pod; naive is 3 per node whatever runs on it.
- API server CPU grows with the watch events it encodes and sends (the watch cache encodes each event
  once per format, then writes it to every watcher) and with lists at daemon start; on this shared
  2-core machine its CPU numbers are noisy, the counts and bytes are not.
`
