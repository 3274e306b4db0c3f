package correlate

import (
	"slices"

	"github.com/drainwatch/drainwatch/collector"
)

// maxSources bounds Termination.Sources: a pod is reached from the node by
// its kubelet and perhaps a proxy or a scraper, not by dozens of commands.
const maxSources = 16

// connSource says who opened a connection the pod accepted or refused: a
// node-local task (the kernel saw it connect) or a remote client, and
// whether that task is this node's kubelet, whose probes are not client
// traffic.
type connSource struct {
	comm  collector.Comm
	local bool
	probe bool
}

// sourceOf reads an event's source without allocating: it runs for every
// accept and refusal of a watched pod.
func (c *Correlator) sourceOf(e *collector.Event) connSource {
	if e.SenderPID == 0 {
		return connSource{}
	}
	return connSource{comm: e.SenderComm, local: true, probe: slices.Contains(c.probeComms, e.SenderComm)}
}

// commsOf turns command names into the kernel's fixed-size form.
func commsOf(names []string) []collector.Comm {
	out := make([]collector.Comm, len(names))
	for i, n := range names {
		copy(out[i][:len(out[i])-1], n)
	}
	return out
}

// noteSource counts a node-local source's accept or refusal in the
// termination's source list.
func noteSource(t *termState, src connSource, refused bool) {
	if t == nil || !src.local {
		return
	}
	comm := src.comm.String()
	i := slices.IndexFunc(t.T.Sources, func(s Source) bool { return s.Comm == comm })
	if i < 0 {
		if len(t.T.Sources) == maxSources {
			return
		}
		t.T.Sources = append(t.T.Sources, Source{Comm: comm, Probe: src.probe})
		i = len(t.T.Sources) - 1
	}
	if refused {
		t.T.Sources[i].Refused++
	} else {
		t.T.Sources[i].Accepted++
	}
}
