package exporter

import (
	"encoding/json"
	"net/http"

	"github.com/drainwatch/drainwatch/correlate"
)

// StartupSource is what the exporter reads startup records from: the
// daemon's bounded set of recent complete ones and those in progress.
type StartupSource interface {
	Startups() []correlate.Startup
}

// StartupList is the body of GET /api/v1/startups: the latest Limit
// startups that match the filter (namespace, workload, pod, revision,
// since, as for terminations), newest first. The daemon holds a bounded
// number (the most recent), so a page is all there is: Truncated says
// that more matched than the limit.
type StartupList struct {
	Startups  []correlate.Startup `json:"startups"`
	Truncated bool                `json:"truncated,omitempty"`
}

// MatchStartup applies a termination filter to a startup; since keeps the
// startups whose window ended at or after it (or is still open).
func (f Filter) MatchStartup(s correlate.Startup) bool {
	return f.matchPod(s.Workload, s.Pod) && (f.Since.IsZero() || !s.Complete || !s.Marks.WindowEnd.Before(f.Since))
}

func (s *Server) listStartups(w http.ResponseWriter, r *http.Request) {
	f, err := ParseFilter(r.URL.Query(), s.now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p, err := ParsePage(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	list := StartupList{Startups: []correlate.Startup{}}
	all := s.startups.Startups()
	for i := len(all) - 1; i >= 0; i-- { // newest first
		if !f.MatchStartup(all[i]) {
			continue
		}
		if len(list.Startups) == p.Limit {
			list.Truncated = true
			break
		}
		list.Startups = append(list.Startups, all[i])
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(list); err != nil {
		s.log.Debug().Err(err).Msg("writing API response")
	}
}

type noStartups struct{}

func (noStartups) Startups() []correlate.Startup { return nil }
