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
	comm  string
	local bool
	probe bool
}

func (c *Correlator) sourceOf(e *collector.Event) connSource {
	if e.SenderPID == 0 {
		return connSource{}
	}
	comm := e.SenderComm.String()
	return connSource{comm: comm, local: true, probe: slices.Contains(c.cfg.ProbeComms, comm)}
}

// noteSource counts a node-local source's accept or refusal in the
// termination's source list.
func noteSource(t *termState, src connSource, refused bool) {
	if t == nil || !src.local {
		return
	}
	i := slices.IndexFunc(t.T.Sources, func(s Source) bool { return s.Comm == src.comm })
	if i < 0 {
		if len(t.T.Sources) == maxSources {
			return
		}
		t.T.Sources = append(t.T.Sources, Source{Comm: src.comm, Probe: src.probe})
		i = len(t.T.Sources) - 1
	}
	if refused {
		t.T.Sources[i].Refused++
	} else {
		t.T.Sources[i].Accepted++
	}
}
