package correlate

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// Blackholed connections (docs/design.md, "connections_blackholed"). Once
// a pod's network is gone (its veth deleted by the runtime's CNI DEL, its
// route withdrawn), SYNs that routing still sends to its address reach no
// socket: the node's kernel drops them (a neighbour that never answers, no
// route, a flooded frame no port wants) and the client sees a connect
// timeout or "no route to host". The kernel reports each such drop of a
// terminating pod's address (EventBlackholed, bpf/blackhole.bpf.c); here
// they become attempts:
//
//   - one per client socket (address and port) and pod port: the
//     retransmissions of a SYN, and the copies a bridge floods to every
//     port, count once;
//   - not one the pod's own network dropped (its listener's backlog, a
//     policy): that is not a missing network;
//   - not one the pod accepted or refused: a bridge that does not know a
//     live pod's MAC floods the SYN, the pod answers it and the other
//     pods drop their copies;
//   - not the kubelet's probes;
//   - from deletion_seen until the drops have stopped for BlackholeWindow
//     after pod_gone (the kubelet deletes the pod from the API after its
//     sandbox is stopped, so the network is gone by then; blackholeEnd),
//     while the pod owns the address.

// blackholeKey names one blackholed attempt.
type blackholeKey struct {
	Remote netip.AddrPort
	Port   uint16
}

// MarshalText keeps the key in the snapshot as "client>port", so that a
// restarted daemon still counts a retransmission once.
func (k blackholeKey) MarshalText() ([]byte, error) {
	return fmt.Appendf(nil, "%s>%d", k.Remote, k.Port), nil
}

func (k *blackholeKey) UnmarshalText(b []byte) error {
	s := string(b)
	i := strings.LastIndexByte(s, '>')
	if i < 0 {
		return fmt.Errorf("blackhole key %q: no port", s)
	}
	remote, err := netip.ParseAddrPort(s[:i])
	if err != nil {
		return fmt.Errorf("blackhole key %q: %w", s, err)
	}
	port, err := strconv.ParseUint(s[i+1:], 10, 16)
	if err != nil {
		return fmt.Errorf("blackhole key %q: %w", s, err)
	}
	*k = blackholeKey{Remote: remote, Port: uint16(port)}
	return nil
}

// blackholed takes a drop of a SYN to the pod's address.
func (c *Correlator) blackholed(p *podState, e *collector.Event) {
	t := p.Term
	if t == nil || !c.cfg.Blackholes || t.Tentative {
		return
	}
	if e.NetnsIno != 0 && e.NetnsIno == p.NetnsIno {
		return // dropped inside the pod's own network
	}
	if e.Time.Before(deletionStart(t)) {
		return
	}
	if end := blackholeEnd(t, c.cfg); !end.IsZero() && e.Time.After(end) {
		return
	}
	if c.sourceOf(e).probe {
		return
	}
	k := blackholeKey{Remote: netip.AddrPortFrom(e.Remote.Addr().Unmap(), e.Remote.Port()), Port: e.Local.Port()}
	if slices.Contains(t.Refused, k) {
		return // the pod refused it: a flooded copy
	}
	if _, ok := t.Blackholes[k]; ok {
		// A retransmission, or another copy. Neither moves
		// LastBlackholed: a client with the kernel's connect timeout
		// retransmits for two minutes, which says nothing about routing.
		return
	}
	if len(t.Blackholes) >= maxTrackedCookies {
		// Past the bound, attempts are still counted; a later accept or
		// refusal of one of them can no longer take it back.
		t.BlackholeOverflow++
	} else {
		if t.Blackholes == nil {
			t.Blackholes = make(map[blackholeKey]time.Time)
		}
		t.Blackholes[k] = e.Time
	}
	t.T.Counts.ConnectionsBlackholed++
	t.T.LastBlackholed = later(t.T.LastBlackholed, e.Time)
	if len(t.T.Connections) < c.cfg.MaxConnPoints {
		t.T.Connections = append(t.T.Connections, ConnPoint{Time: e.Time, Blackholed: true})
	}
}

// blackholeEnd is when the termination stops taking blackholed attempts:
// BlackholeWindow after pod_gone or after the latest drop, whichever is
// later, so a source that keeps sending for longer than the window after
// the pod is gone (a load balancer's deregistration delay) is counted to
// its end, and the termination completes once the drops have stopped for
// a window. The scopes' release (collector.ScopeRelease after the
// deletion) or a new pod at the address ends the drops in any case. Zero
// while the pod is not gone.
func blackholeEnd(t *termState, cfg Config) time.Time {
	gone := goneBy(t)
	if gone.IsZero() {
		return time.Time{}
	}
	return later(gone, t.T.LastBlackholed).Add(cfg.BlackholeWindow)
}

// LastBlackholedAfter says when the last blackholed attempt was dropped,
// relative to the deletion ("1.6s after the deletion"), "" without any.
func (t Termination) LastBlackholedAfter() string {
	if t.Counts.ConnectionsBlackholed == 0 {
		return ""
	}
	return relative(deletionRef(t), t.LastBlackholed, deletionRefName(t))
}

// recentRefused bounds termState.Refused: a flooded copy is dropped in
// the same softirq pass as the pod's refusal of its original, so only the
// latest refusals can have copies still to come.
const recentRefused = 64

// reached takes back a blackholed attempt the pod accepted or refused
// after all (the copies of a flooded SYN can come before the pod's own
// answer), and remembers a refused one, whose flooded copies can come
// after it.
func reached(t *termState, e *collector.Event, refused bool) {
	if t == nil {
		return
	}
	k := blackholeKey{Remote: netip.AddrPortFrom(e.Remote.Addr().Unmap(), e.Remote.Port()), Port: e.Local.Port()}
	if at, ok := t.Blackholes[k]; ok {
		delete(t.Blackholes, k)
		t.T.Counts.ConnectionsBlackholed--
		// Its point on the timeline goes too, and the latest drop is
		// the latest of those left.
		if i := slices.IndexFunc(t.T.Connections, func(p ConnPoint) bool { return p.Blackholed && p.Time.Equal(at) }); i >= 0 {
			t.T.Connections = slices.Delete(t.T.Connections, i, i+1)
		}
		if t.T.LastBlackholed.Equal(at) && t.BlackholeOverflow == 0 {
			t.T.LastBlackholed = time.Time{}
			for _, x := range t.Blackholes {
				t.T.LastBlackholed = later(t.T.LastBlackholed, x)
			}
		}
	}
	if !refused {
		return
	}
	if len(t.Refused) < recentRefused {
		t.Refused = append(t.Refused, k)
		return
	}
	t.Refused[t.RefusedNext%recentRefused] = k
	t.RefusedNext = (t.RefusedNext + 1) % recentRefused
}
