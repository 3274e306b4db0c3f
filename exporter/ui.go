package exporter

import (
	"bytes"
	_ "embed"
	"html/template"
	"net/http"
	"time"

	"github.com/drainwatch/drainwatch/correlate"
)

//go:embed ui.html
var pageSource string

// pageTemplate renders /ui: one server-side SVG timeline per termination,
// no script and nothing fetched from elsewhere, so it reads the same from a
// port-forward on an air-gapped cluster.
var pageTemplate = template.Must(template.New("ui").Funcs(template.FuncMap{
	"add": func(a, b int) int { return a + b },
	"sub": func(a, b int) int { return a - b },
}).Parse(pageSource))

func (s *Server) timelinePage(w http.ResponseWriter, r *http.Request) {
	f, err := ParseFilter(r.URL.Query(), s.now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// The page is rendered whole before it is sent, so that a failure is a
	// 500, not half a page: it holds maxTimelines terminations, read as the
	// source is, so that is what it costs.
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, newPageView(selectLatest(s.source, f, maxTimelines), s.now())); err != nil {
		s.log.Error().Err(err).Msg("rendering the timeline page")
		http.Error(w, "rendering the timeline page failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// TimelineSections renders the terminations as /ui draws them (newest
// first, at most 50: the page's bound), for a page of another's making:
// its style element, then a section per termination, without the links
// to a daemon's API.
func TimelineSections(ts []correlate.Termination, now time.Time) (template.HTML, error) {
	v := newPageView(ts, now)
	v.Offline = true
	var buf bytes.Buffer
	if err := pageTemplate.ExecuteTemplate(&buf, "style", nil); err != nil {
		return "", err
	}
	if err := pageTemplate.ExecuteTemplate(&buf, "sections", v); err != nil {
		return "", err
	}
	return template.HTML(buf.String()), nil // #nosec G203 -- html/template's own escaped output
}
