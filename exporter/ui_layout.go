package exporter

import (
	"fmt"
	"math"
	"time"

	"github.com/drainwatch/drainwatch/correlate"
)

// Geometry of one timeline SVG, in CSS pixels. The page puts every SVG at
// x = 0 of the viewport, so these are also screenshot coordinates.
const (
	svgWidth     = 960
	plotLeft     = 130
	plotRight    = 940
	labelRowH    = 13
	labelRows    = 6
	labelCharW   = 7 // an 11 px sans-serif character, rounded up so labels never touch
	acceptedLane = 94
	refusedLane  = 122
	laneHeight   = 18
	axisY        = 154
	svgHeight    = 178
	// The legend sits in the left gutter, above the lane names: a bar per
	// client outcome, a dot per probe outcome.
	legendX       = 8
	legendClients = 44
	legendProbes  = 66
)

// MarkColors are the colours of the mark lines, one per mark and used for
// nothing else on the page (the screenshot test looks for them).
var MarkColors = map[string]string{
	"delete_requested": "#c0a000", "deletion_seen": "#00a0b0", "killing": "#8a2be2",
	"prestop_failed": "#a0522d", "stop_signal": "#ff8c00", "endpoints_not_ready": "#1e60d0",
	"listener_closed": "#c00070", "last_accept": "#2e8b57", "sigkill": "#b00000",
	"exit": "#7a7a00", "pod_gone": "#4b0082",
}

// Connection tick colours: client attempts are bars, the kubelet's probes
// dots of their own colours (used for nothing else on the page).
const (
	AcceptedColor      = "#30c030"
	RefusedColor       = "#ff2020"
	ProbeAcceptedColor = "#5050ff"
	ProbeRefusedColor  = "#e000e0"
)

// timeScale maps wall-clock times to x positions of the plot area.
type timeScale struct {
	start, end time.Time
	origin     time.Time // "+0.000s": the stop signal, else the first mark
}

func newTimeScale(t correlate.Termination) timeScale {
	var start, end time.Time
	extend := func(x time.Time) {
		if start.IsZero() || x.Before(start) {
			start = x
		}
		if x.After(end) {
			end = x
		}
	}
	for _, m := range t.Marks.Observed() {
		extend(m.Time)
	}
	for _, c := range t.Connections {
		extend(c.Time)
	}
	span := end.Sub(start)
	if span <= 0 {
		span = time.Second
	}
	pad := span / 20
	ts := timeScale{start: start.Add(-pad), end: start.Add(span + pad), origin: t.Marks.StopSignal}
	if ts.origin.IsZero() {
		ts.origin = start
	}
	return ts
}

// X returns the x position of time x (pixels, 1 decimal).
func (s timeScale) X(x time.Time) float64 {
	frac := float64(x.Sub(s.start)) / float64(s.end.Sub(s.start))
	return math.Round((plotLeft+frac*(plotRight-plotLeft))*10) / 10
}

// rel formats x relative to the origin: "+0.125s", "-1.500s".
func (s timeScale) rel(x time.Time) string {
	return correlate.FormatOffset(x.Sub(s.origin))
}

// ticks returns axis ticks at a round step, relative to the origin.
func (s timeScale) ticks() []axisTick {
	spanS := s.end.Sub(s.start).Seconds()
	step := 60.0
	for _, st := range []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 30} {
		if spanS/st <= 10 {
			step = st
			break
		}
	}
	first := math.Ceil(s.start.Sub(s.origin).Seconds()/step) * step
	var out []axisTick
	for v := first; s.origin.Add(time.Duration(v * float64(time.Second))).Before(s.end); v += step {
		at := s.origin.Add(time.Duration(v * float64(time.Second)))
		label := math.Round(v*1000) / 1000
		if label == 0 {
			label = 0 // no "-0s"
		}
		out = append(out, axisTick{X: s.X(at), Label: fmt.Sprintf("%gs", label)})
	}
	return out
}

type axisTick struct {
	X     float64
	Label string
}

// labelRows places label spans [from, to] greedily: each goes to the first
// row where it overlaps nothing, else to the row whose labels end first.
type labelRowSet [labelRows][][2]float64

func (rs *labelRowSet) place(from, to float64) int {
	best, bestEnd := 0, math.Inf(1)
	for i, row := range rs {
		free, end := true, math.Inf(-1)
		for _, sp := range row {
			free = free && (to < sp[0] || from > sp[1])
			end = max(end, sp[1])
		}
		if free {
			rs[i] = append(row, [2]float64{from, to})
			return i
		}
		if end < bestEnd {
			best, bestEnd = i, end
		}
	}
	rs[best] = append(rs[best], [2]float64{from, to})
	return best
}
