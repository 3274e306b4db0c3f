package exporter

import (
	"fmt"
	"time"

	"github.com/drainwatch/drainwatch/correlate"
)

// timelineView is everything the page template prints for one termination;
// every coordinate is computed here so the template only formats.
type timelineView struct {
	Title, Subtitle, Outcome string
	UID                      string // for the relative link to the JSON record (it resolves through the pod proxy too)
	StopSignal               string // "SIGQUIT", or "the stop signal" when not seen
	Sources                  string
	Death                    string // how the server ended (correlate.DeathText)
	// RoutingSources is the table of sources still sending after
	// endpoints_not_ready, last sends relative to the stop signal.
	RoutingSources []routingSourceRow
	Counts         correlate.Counts
	Diagnoses      []correlate.Diagnosis
	Partial        []string
	Marks          []markView
	// Accepted and Refused are client attempts (bars); ProbeAccepted and
	// ProbeRefused the kubelet's (dots), in the same lanes.
	Accepted, Refused           []float64
	ProbeAccepted, ProbeRefused []float64
	Ticks                       []axisTick
	Geometry                    geometry
}

// markView is one mark: a full-height line, and a flag in the mark's own
// label row so that marks at the same instant (delete_requested, killing,
// stop_signal without preStop) each stay visible.
type markView struct {
	Name, Color, Rel string
	X, LabelY        float64
	FlagX, FlagY     float64
	Anchor           string // text-anchor: start, or end near the right edge
	DX               float64
}

// geometry exposes the layout constants to the template.
type geometry struct {
	Width, Height, PlotLeft, PlotRight, AcceptedLane, RefusedLane, LaneHeight, AxisY, MarksTop int
	// ProbeDY is the dots' centre below a lane's top; LegendX the x of the
	// legend's first swatch, LegendClients and LegendProbes its rows.
	ProbeDY, LegendX, LegendClients, LegendProbes int
}

var pageGeometry = geometry{svgWidth, svgHeight, plotLeft, plotRight, acceptedLane, refusedLane, laneHeight, axisY,
	labelRows*labelRowH + 4, laneHeight / 2, legendX, legendClients, legendProbes}

func newTimelineView(t correlate.Termination) timelineView {
	s := newTimeScale(t)
	w := t.Workload
	v := timelineView{
		Title:      fmt.Sprintf("%s/%s", w.Namespace, t.Pod),
		Subtitle:   subtitle(t),
		UID:        t.PodUID,
		StopSignal: StopSignalName(t),
		Sources:    SourcesLine(t.Sources),
		Death:      deathLine(t),
		Outcome:    t.Outcome,
		Counts:     t.Counts,
		Diagnoses:  t.Diagnoses,
		Partial:    t.PartialReasons,
		Ticks:      s.ticks(),
		Geometry:   pageGeometry,
	}
	v.RoutingSources = routingSourceRows(t, s.origin)
	var rows labelRowSet
	for _, m := range t.Marks.Observed() {
		mv := markView{Name: m.Name, Color: MarkColors[m.Name], Rel: s.rel(m.Time), X: s.X(m.Time), Anchor: "start", DX: 4}
		width := float64(len(mv.Name)+len(mv.Rel)+2) * labelCharW
		from, to := mv.X-3, mv.X+width
		if to > svgWidth {
			mv.Anchor, mv.DX = "end", -4
			from, to = mv.X-width, mv.X+3
		}
		row := rows.place(from, to)
		mv.LabelY = float64(row+1) * labelRowH
		mv.FlagX, mv.FlagY = mv.X-1.5, mv.LabelY-10
		v.Marks = append(v.Marks, mv)
	}
	for _, c := range t.Connections {
		v.addConnection(c, s.X(c.Time))
	}
	return v
}

// deathLine says how the server ended when that matters (see
// correlate.DeathNotable), "" otherwise.
func deathLine(t correlate.Termination) string {
	if !correlate.DeathNotable(t) {
		return ""
	}
	return correlate.DeathText(t)
}

// addConnection puts an attempt in its lane, the kubelet's probes apart
// from client traffic.
func (v *timelineView) addConnection(c correlate.ConnPoint, x float64) {
	switch {
	case c.Probe && c.Refused:
		v.ProbeRefused = append(v.ProbeRefused, x)
	case c.Probe:
		v.ProbeAccepted = append(v.ProbeAccepted, x)
	case c.Refused:
		v.Refused = append(v.Refused, x)
	default:
		v.Accepted = append(v.Accepted, x)
	}
}

// pageView is the whole /ui page.
type pageView struct {
	Generated string
	Timelines []timelineView
	// Offline leaves out the links to the daemon's API: a page saved away
	// from it (drainwatch rollout -o html).
	Offline bool
}

// maxTimelines bounds the page: the most recent terminations first.
const maxTimelines = 50

func newPageView(ts []correlate.Termination, now time.Time) pageView {
	p := pageView{Generated: now.UTC().Format(time.RFC3339)}
	for i := len(ts) - 1; i >= 0 && len(p.Timelines) < maxTimelines; i-- {
		p.Timelines = append(p.Timelines, newTimelineView(ts[i]))
	}
	return p
}

func subtitle(t correlate.Termination) string {
	w := t.Workload
	owner := "no controller"
	if w.Kind != "none" && w.Kind != "" {
		owner = fmt.Sprintf("%s %s revision %s", w.Kind, w.Name, w.Revision)
	}
	cause := ""
	if t.Cause != "" {
		cause = " · cause " + t.Cause
	}
	return fmt.Sprintf("%s%s · node %s · grace %s · uid %s", owner, cause, t.Node, t.GracePeriod, t.PodUID)
}
