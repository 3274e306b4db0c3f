package scale

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/rest"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/collector/kube"
)

// Design is what each node's daemon watches.
type Design string

const (
	// None runs no daemon: the control plane's own cost, the baseline.
	None Design = "none"
	// Scoped is drainwatch's kube side as `drainwatch run` builds it
	// (collector/kube.New with the node's name).
	Scoped Design = "scoped"
	// Naive watches the node's pods like Scoped, but every EndpointSlice
	// and every pod Event of the cluster.
	Naive Design = "naive"
)

// received counts objects a daemon's informers handed to it (list items
// and watch events), by resource.
type received struct {
	pods, services, slices, events uint64
	// sliceWatches counts EndpointSlice watches started (each lists the
	// slices it follows).
	sliceWatches uint64
	// terminations counts the local pods whose deletion a daemon saw;
	// killingSeen those of them whose Killing Event it received (the
	// Killing mark of a termination). Scoped only.
	terminations, killingSeen uint64
}

// watcher is one node's daemon, kube side only.
type watcher interface {
	run(ctx context.Context) error
	synced() bool
	received() received
}

// daemon is one node's watcher with its own connection and counters.
type daemon struct {
	node string
	wire *wire
	w    watcher
}

// startDaemons starts one daemon per node, each with its own client, and
// waits until every one has listed its node's pods.
func startDaemons(ctx context.Context, d Design, nodes []string, base *rest.Config, log zerolog.Logger) ([]*daemon, func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop := func() { cancel(); wg.Wait() }
	out := make([]*daemon, 0, len(nodes))
	for _, node := range nodes {
		dm, err := newDaemon(d, node, base, log)
		if err != nil {
			stop()
			return nil, nil, err
		}
		out = append(out, dm)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := dm.w.run(ctx); err != nil {
				log.Error().Err(err).Str("node", dm.node).Msg("daemon stopped")
			}
		}()
	}
	if err := waitSynced(ctx, out, syncTimeout); err != nil {
		stop()
		return nil, nil, err
	}
	return out, stop, nil
}

// syncTimeout bounds the daemons' first lists (each client has
// client-go's default 5 QPS, as the daemon does).
const syncTimeout = 6 * time.Minute

func waitSynced(ctx context.Context, ds []*daemon, within time.Duration) error {
	deadline := time.Now().Add(within)
	for i := 0; i < len(ds); {
		if ds[i].w.synced() {
			i++
			continue
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("daemon of %s has not listed its pods within %s", ds[i].node, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

func newDaemon(d Design, node string, base *rest.Config, log zerolog.Logger) (*daemon, error) {
	dm := &daemon{node: node, wire: &wire{}}
	cfg, err := dm.wire.config(base)
	if err != nil {
		return nil, fmt.Errorf("building the client of %s: %w", node, err)
	}
	switch d {
	case Scoped:
		sink := &killingTally{deleted: map[string]bool{}, killing: map[string]bool{}, terminating: map[string]time.Time{}}
		k, err := kube.New(kube.Config{NodeName: node, Rest: cfg, Sink: sink, Log: log.With().Str("node", node).Logger()})
		if err != nil {
			return nil, err
		}
		dm.w = scoped{k, sink}
	case Naive:
		if dm.w, err = newNaive(node, cfg); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("design %q runs no daemon", d)
	}
	return dm, nil
}

// scoped adapts collector/kube's Kube.
type scoped struct {
	k     *kube.Kube
	tally *killingTally
}

func (s scoped) run(ctx context.Context) error { return s.k.Run(ctx) }
func (s scoped) synced() bool                  { return s.k.Synced() }
func (s scoped) received() received {
	st := s.k.Stats()
	terminations, killing := s.tally.counts()
	return received{pods: st.PodEvents, services: st.ServiceEvents, slices: st.SliceEvents, events: st.KubeletEvents,
		sliceWatches: st.SliceWatches, terminations: terminations, killingSeen: killing}
}

// discard stands in for the correlator: the API server's cost does not
// depend on what the daemon does with what it receives.
type discard struct{}

func (discard) Pod(collector.PodUpdate)           {}
func (discard) PodDeleted(collector.PodDeleted)   {}
func (discard) Kubelet(collector.KubeletEvent)    {}
func (discard) Endpoint(collector.EndpointUpdate) {}

// killingTally stands in for the correlator and keeps, per pod UID, whether
// the daemon saw its deletion and its Killing Event: a termination whose
// Killing Event never arrives has no stop mark.
type killingTally struct {
	discard
	mu               sync.Mutex
	deleted, killing map[string]bool
	// delays are the Killing Events' receipt minus their time (the
	// hollow kubelet's whole-second firstTimestamp: up to 1 s more).
	delays []time.Duration
	// terminating is when the daemon first saw a pod with a deletion
	// timestamp: its Event watch starts then.
	terminating map[string]time.Time
	// afterWatch are the Killing Events' receipt minus terminating.
	afterWatch []time.Duration
}

func (t *killingTally) Pod(u collector.PodUpdate) {
	if u.Pod.DeletionTimestamp.IsZero() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.terminating[u.Pod.UID]; !ok {
		t.terminating[u.Pod.UID] = time.Now()
	}
}

// missed splits the terminations without a Killing Event: the daemon never
// saw the pod terminating (no Event watch started), or it did.
func (t *killingTally) missed() (unwatched, watched uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid := range t.deleted {
		switch _, seen := t.terminating[uid]; {
		case t.killing[uid]:
		case seen:
			watched++
		default:
			unwatched++
		}
	}
	return unwatched, watched
}

func (t *killingTally) PodDeleted(d collector.PodDeleted) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deleted[d.UID] = true
}

func (t *killingTally) Kubelet(e collector.KubeletEvent) {
	if e.Reason != kube.ReasonKilling {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.killing[e.PodUID] {
		t.delays = append(t.delays, time.Since(e.Time))
		if at, ok := t.terminating[e.PodUID]; ok {
			t.afterWatch = append(t.afterWatch, time.Since(at))
		}
	}
	t.killing[e.PodUID] = true
}

func (t *killingTally) killingDelays() (sinceEvent, sinceWatch []time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.delays), slices.Clone(t.afterWatch)
}

// counts returns the deletions seen and how many of them had their
// Killing Event.
func (t *killingTally) counts() (terminations, killing uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid := range t.deleted {
		terminations++
		if t.killing[uid] {
			killing++
		}
	}
	return terminations, killing
}
