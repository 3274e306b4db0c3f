package main

import (
	"bytes"
	"html/template"
	"io"
	"strings"
	"time"

	"github.com/drainwatch/drainwatch/advise"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

// rolloutPage is `drainwatch rollout -o html`: the report and every old
// pod's timeline as the daemons' /ui draws it, in one file with nothing
// fetched from elsewhere, to attach to an incident review.
var rolloutPage = template.Must(template.New("rollout").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>drainwatch — {{.Ref}} in {{.R.Namespace}}</title>
<style>
 .report { padding: 4px 12px; font-family: sans-serif; color: #222; }
 .report table { border-collapse: collapse; font-size: 13px; margin: 6px 0 10px 0; }
 .report th, .report td { padding: 2px 10px 2px 0; text-align: right; }
 .report td { white-space: nowrap; }
 .report th:first-child, .report td:first-child { text-align: left; }
 .report td.l, .report th.l { text-align: left; }
 .report .missing { color: #b00; font-weight: bold; }
 .report pre { font-size: 12px; background: #f6f6f6; padding: 6px; }
</style>
</head>
<body>
<div class="report">
<h1>{{.Ref}} in {{.R.Namespace}}</h1>
<div class="sub">{{.R.Terminations}} terminations and {{.R.Startups}} startups on {{len .R.Nodes}} nodes, {{len .R.Revisions}} revisions · generated {{.Generated}}</div>
{{if .R.Unanswered}}<p class="missing">Not answered (their pods are missing): {{range $i, $n := .R.Unanswered}}{{if $i}}, {{end}}{{$n}}{{end}}</p>{{end}}
{{if .R.Revisions}}<h2>Per revision</h2>
<table>
<tr><th>revision</th><th class="l">first</th><th>gone</th><th>refused</th><th>killed by SIGKILL</th><th>killed at exit</th><th>blackholed</th><th>reset at shutdown</th><th>reset on reuse</th><th>came</th><th>refused before Ready</th><th>refused after Ready</th><th>reset after Ready</th><th>partial</th></tr>
{{range .R.Revisions}}<tr><td>{{or .Revision "-"}}</td><td class="l">{{.First.UTC.Format "2006-01-02T15:04:05Z"}}</td><td>{{.Terminations}}</td><td>{{.Refused}}</td><td>{{.RequestsKilledBySigkill}}</td><td>{{.RequestsKilledAtExit}}</td><td>{{.ConnectionsBlackholed}}</td><td>{{.ResetAtShutdown}}</td><td>{{.ResetOnReuse}}</td><td>{{.Startups}}</td><td>{{.RefusedBeforeReady}}</td><td>{{.RefusedAfterReady}}</td><td>{{.ResetAfterReady}}</td><td>{{.Partial}}</td></tr>
{{end}}</table>{{end}}
{{with .R.Slowest}}<p>Slowest routing source: <b>{{.Source}}</b> ({{.Kind}}), still sending {{$.SlowestLag}} after pod {{.Pod}}'s endpoint became not ready (node {{.Node}}).</p>{{end}}
{{if .R.Diagnoses}}<h2>Diagnoses</h2><ul>{{range .R.Diagnoses}}<li>{{.Count}}× <b>{{.Code}}</b>{{if .Fix}}: {{.Fix}}{{end}}</li>{{end}}</ul>{{end}}
{{if .Advice}}<h2>Advice</h2><pre>{{.Advice}}</pre>{{end}}
{{if .R.Pods}}<h2>Pods</h2>
<table>
<tr><th>pod</th><th>revision</th><th class="l">side</th><th class="l">node</th><th class="l">at</th><th class="l">outcome</th><th class="l">lost</th><th class="l">diagnoses</th></tr>
{{range .R.Pods}}<tr><td>{{.Pod}}</td><td>{{or .Revision "-"}}</td><td class="l">{{.Side}}</td><td class="l">{{or .Node "-"}}</td><td class="l">{{.At.UTC.Format "2006-01-02T15:04:05Z"}}</td><td class="l">{{.Outcome}}{{if .Partial}} (partial){{end}}</td><td class="l">{{or .Lost "-"}}</td><td class="l">{{range $i, $d := .Diagnoses}}{{if $i}}, {{end}}{{$d}}{{end}}</td></tr>
{{end}}</table>{{end}}
{{if .Timelines}}<h2>Terminations, newest first (times relative to the stop signal)</h2>{{end}}
</div>
{{.Timelines}}
</body>
</html>
`))

// rolloutPageView is what rolloutPage renders.
type rolloutPageView struct {
	R          rolloutReport
	Ref        string // "deployment/web"
	Generated  string
	SlowestLag string
	Advice     string
	Timelines  template.HTML
}

// Refused is the revision's refusals before and after the stop signal,
// the text report's REFUSED.
func (t revisionTotals) Refused() int { return t.RefusedAfterSigterm + t.RefusedBeforeSigterm }

// writeHTML writes the report as one page, with the rollout's
// terminations drawn as the daemons' /ui draws them.
func (r rolloutReport) writeHTML(w io.Writer, now time.Time) error {
	v := rolloutPageView{R: r, Ref: strings.ToLower(r.Kind) + "/" + r.Name, Generated: now.UTC().Format(time.RFC3339)}
	if s := r.Slowest; s != nil {
		v.SlowestLag = correlate.FormatSeconds(time.Duration(s.LagSeconds * float64(time.Second)))
	}
	if len(r.Advice) > 0 {
		var b strings.Builder
		if err := advise.WriteText(&b, r.Advice); err != nil {
			return err
		}
		v.Advice = b.String()
	}
	var err error
	if v.Timelines, err = exporter.TimelineSections(r.terms, now); err != nil {
		return err
	}
	// Rendered whole first: an error is an error, not half a page.
	var buf bytes.Buffer
	if err := rolloutPage.Execute(&buf, v); err != nil {
		return err
	}
	_, err = w.Write(buf.Bytes())
	return err
}
