package exporter

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
)

// TerminationSource is what the exporter reads terminations from: the
// correlator (completed and in-progress records).
type TerminationSource interface {
	Terminations() []correlate.Termination
	Get(uid string) (correlate.Termination, bool)
}

// Filter selects terminations: empty fields match everything. Since keeps
// terminations with a mark at or after it.
type Filter struct {
	Namespace string
	Workload  string
	Pod       string
	Revision  string
	Since     time.Time
}

// Match reports whether t passes the filter.
func (f Filter) Match(t correlate.Termination) bool {
	return f.matchPod(t.Workload, t.Pod) && (f.Since.IsZero() || !t.Marks.Last().Before(f.Since))
}

// matchPod applies the filter's namespace, workload, pod and revision to
// a record of pod (a termination's or a startup's).
func (f Filter) matchPod(w collector.Workload, pod string) bool {
	return (f.Namespace == "" || w.Namespace == f.Namespace) && (f.Workload == "" || w.Name == f.Workload) &&
		(f.Pod == "" || pod == f.Pod) && (f.Revision == "" || w.Revision == f.Revision)
}

// ParseFilter reads namespace, workload, pod and since from a query. since
// is RFC 3339 or a duration back from now ("15m").
func ParseFilter(q url.Values, now time.Time) (Filter, error) {
	f := Filter{Namespace: q.Get("namespace"), Workload: q.Get("workload"), Pod: q.Get("pod"), Revision: q.Get("revision")}
	s := q.Get("since")
	if s == "" {
		return f, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		// A negative duration would be a time in the future: nothing matches,
		// silently. It is a mistake for "since 5 minutes ago" (5m).
		if d < 0 {
			return f, fmt.Errorf("since=%q is negative: give how far back, like %s", s, -d)
		}
		f.Since = now.Add(-d)
		return f, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return f, fmt.Errorf("since=%q is neither RFC 3339 nor a duration like 15m", s)
	}
	f.Since = t
	return f, nil
}

// TerminationList is the body of GET /api/v1/terminations.
// It is one page: Continue, when set, is the token that asks for the next
// (?continue=), and is left out on the last page.
type TerminationList struct {
	Terminations []TerminationView `json:"terminations"`
	Continue     string            `json:"continue,omitempty"`
}

func (s *Server) listTerminations(w http.ResponseWriter, r *http.Request) {
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
	page, next := SelectPage(s.source, f, p)
	s.writeList(w, page, next)
}

// writeList writes a TerminationList one termination at a time, each on a
// line of its own: json.Encoder builds a whole value in memory (twice when
// indenting) before writing it, and a page can be megabytes.
func (s *Server) writeList(w http.ResponseWriter, ts []correlate.Termination, next string) {
	w.Header().Set("Content-Type", "application/json")
	bw := bufio.NewWriterSize(w, 32<<10)
	enc := json.NewEncoder(bw)
	err := writeString(bw, `{"terminations": [`)
	for i, t := range ts {
		sep := ","
		if i == 0 {
			sep = "\n"
		}
		err = cmp.Or(err, writeString(bw, sep), enc.Encode(NewTerminationView(t)))
	}
	err = cmp.Or(err, writeString(bw, "]"))
	if next != "" {
		// A token is base64url: it needs no escaping.
		err = cmp.Or(err, writeString(bw, `, "continue": "`+next+`"`))
	}
	err = cmp.Or(err, writeString(bw, "}\n"), bw.Flush())
	if err != nil {
		s.log.Debug().Err(err).Msg("writing API response")
	}
}

func writeString(w *bufio.Writer, s string) error {
	_, err := w.WriteString(s)
	return err
}

func (s *Server) getTermination(w http.ResponseWriter, r *http.Request) {
	uid := r.PathValue("uid")
	t, ok := s.source.Get(uid)
	if !ok {
		http.Error(w, fmt.Sprintf("no termination of pod uid %q on this node", uid), http.StatusNotFound)
		return
	}
	s.writeJSON(w, NewTerminationView(t))
}

func (s *Server) writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		s.log.Debug().Err(err).Msg("writing API response")
	}
}
