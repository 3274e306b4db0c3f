package correlate

import (
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// A refusal is one connection attempt, not one RST. When the RST that
// refused a SYN is lost on the way back (a full backlog on a busy node,
// seen in the flood test: one RST in ~140,000), the client retransmits the
// SYN 1 s later, with the same addresses and sequence number, and the
// kernel refuses it again; the client sees one ECONNREFUSED. synMemory
// remembers the refused SYNs of terminations for synWindow to 2×synWindow,
// which covers the first two retransmissions (1 s and 3 s after the SYN),
// in two generations of at most synGeneration entries each: under a flood
// of refusals the window shrinks, memory does not grow (2 × 32,768 keys of
// 28 bytes). A restart forgets it: a retransmission seen right after one
// counts as an attempt.
const (
	synWindow     = 4 * time.Second
	synGeneration = 1 << 15
)

// synKey names one SYN: the network namespace it reached, the client's
// address and port, the closed port and the sequence number.
type synKey struct {
	netns, seq uint32
	raddr      [16]byte
	rport      uint16
	lport      uint16
}

type synMemory struct {
	cur, prev map[synKey]struct{}
	since     time.Time // when cur began
}

// repeat records the refused SYN e and reports whether it was refused
// already: a retransmission, not an attempt of its own.
func (m *synMemory) repeat(e *collector.Event) bool {
	k := synKey{netns: e.NetnsIno, seq: e.Seq, raddr: e.Remote.Addr().As16(), rport: e.Remote.Port(), lport: e.Local.Port()}
	if _, ok := m.cur[k]; ok {
		return true
	}
	if _, ok := m.prev[k]; ok {
		return true
	}
	if m.cur == nil || len(m.cur) >= synGeneration || e.Time.Sub(m.since) >= synWindow {
		m.prev, m.cur, m.since = m.cur, make(map[synKey]struct{}), e.Time
	}
	m.cur[k] = struct{}{}
	return false
}
