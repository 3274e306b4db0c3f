package node

import (
	"errors"
	"slices"

	"github.com/drainwatch/drainwatch/collector"
)

// A pod's accepts cost the node a map update in the kernel, not a record
// each, until its termination begins: from then on the correlator needs
// them one by one (accepted_after_endpoints_not_ready, the connections
// accepted after the stop signal). Scopes turns the records on when the
// pod starts terminating and hands the correlator what the kernel held
// until then. They stay on until the pod's scopes are released at the end
// of its termination's tail (Release), which removes the netns from the
// kernel's maps altogether.

// Terminating notes that the API asked for the pod's deletion. Call it
// before the correlator takes the API event that begins the termination:
// the accepts held until now then reach it as the pod's history, which the
// termination takes over. A pod whose netns is not watched yet gets its
// records as soon as it is.
func (s *Scopes) Terminating(uid string) {
	ps := s.pods[uid]
	if ps == nil {
		return
	}
	ps.terminating = true
	s.detail(ps)
	s.blackholeAddr(ps)
}

// blackholeAddr has the kernel report the SYNs to a terminating pod's
// addresses that the node drops once the pod's network is gone, until an
// address is released with the pod's scopes or taken by its next pod.
func (s *Scopes) blackholeAddr(ps *podScope) {
	if !ps.terminating {
		return
	}
	for _, ip := range ps.ips {
		if s.addrOwner[ip] != ps.uid || slices.Contains(ps.blackholed, ip) {
			continue
		}
		if err := s.kernel.BlackholeAddr(ip); err != nil {
			s.log.Warn().Err(err).Str("pod_uid", ps.uid).Stringer("ip", ip).Msg("watching a terminating pod's address: its blackholed connections are not counted")
			continue
		}
		ps.blackholed = append(ps.blackholed, ip)
	}
}

// Starting notes that a new pod's startup is open: its netns sends a
// record per accept (the first accepted connection after Ready) until
// Started, without handing the held accepts over (its termination, if one
// begins meanwhile, takes them).
func (s *Scopes) Starting(uid string) {
	if ps := s.pods[uid]; ps != nil && !ps.starting {
		ps.starting = true
		s.detail(ps)
	}
}

// Started notes that the pod's startup is complete: unless the pod is
// terminating, its accepts stay in the kernel again (held until a
// termination needs them, the records before were the correlator's).
func (s *Scopes) Started(uid string) {
	ps := s.pods[uid]
	if ps == nil || !ps.starting {
		return
	}
	ps.starting = false
	if ps.terminating || !ps.detail {
		return
	}
	if err := s.kernel.SetDetail(ps.netns, false); err != nil {
		s.log.Warn().Err(err).Str("pod_uid", ps.uid).Msg("turning off the accept records of a started pod: they keep coming")
		return
	}
	ps.detail = false
}

// detail turns on the accept records of a terminating or starting pod's
// watched netns and, once it terminates, hands the held accepts to the
// correlator, once per run (the correlator ignores a second reading of
// the same history after a restart).
func (s *Scopes) detail(ps *podScope) {
	if !ps.terminating && !ps.starting || ps.handed || ps.netns == 0 || ps.hostNet || s.netnsOwner[ps.netns] != ps.uid {
		return
	}
	if ps.detail && !ps.terminating {
		return
	}
	log := s.log.With().Str("pod_uid", ps.uid).Uint32("netns", ps.netns).Logger()
	err := s.kernel.SetDetail(ps.netns, true)
	inexact := errors.Is(err, collector.ErrHandoverInexact)
	if err != nil && !inexact {
		log.Warn().Err(err).Msg("turning on accept records for a terminating or starting pod: its accepts are not counted")
		return
	}
	if inexact && ps.terminating {
		log.Warn().Err(err).Msg("accept records on without an exact handover: the termination's accept counts are partial")
	}
	ps.detail = true
	if !ps.terminating {
		return
	}
	ps.handed = true
	sum, err := s.kernel.ScopeAccepts(ps.netns)
	if err != nil {
		log.Warn().Err(err).Msg("reading the accepts the kernel held: the termination's accept counts are partial")
		sum, inexact = collector.AcceptSummary{}, true
	}
	sum.PodUID, sum.NetnsIno, sum.Inexact = ps.uid, ps.netns, sum.Inexact || inexact
	s.corr.AcceptSummary(sum)
}
