package console

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle/internal/timeline"
)

// Geometry of the timeline picture, in SVG user units (pixels at full
// width).
const (
	svgWidth     = 960.0
	svgPlotX     = 250.0 // where the bars start; the labels are left of it
	svgPlotRight = 50.0  // room right of the bars for the failure and retry glyphs
	svgTop       = 30.0  // the time axis
	svgRowH      = 22.0
	svgBar       = 12.0
	svgLegendH   = 30.0
	svgMinBar    = 3.0
	// maxBars bounds the rows drawn; a longer history says how many more.
	maxBars = 300
)

// svgTimeline is the timeline picture of a history, laid out for the
// "timeline" template: each bar a row.
type svgTimeline struct {
	Width, Height float64
	PlotX, PlotW  float64
	// AxisY is the baseline of the tick labels; ticks run from TickTop to
	// TickBottom.
	AxisY, TickTop, TickBottom float64
	BarH                       float64
	Ticks                      []svgTick
	Rows                       []svgRow
	// NowX is where "now" is, drawn when some bar is open.
	NowX   float64
	HasNow bool
	// More counts the bars not drawn.
	More   int
	Legend []svgLegend
	// LegendY is the baseline of the legend's labels, LegendBoxY the top
	// of its boxes.
	LegendY, LegendBoxY float64
	// Summary describes the picture in words, for screen readers.
	Summary string
}

type svgTick struct {
	X     float64
	Label string
}

type svgLegend struct {
	X, TextX float64
	Class    string
	Label    string
}

// svgRow is one bar.
type svgRow struct {
	Y, BarY, TextY, MidY float64
	Label                string
	// Title is the tooltip: what the bar is, when, how it ended.
	Title string
	Class string
	X, W  float64
	// Instant bars (signals) are diamonds at X.
	Instant bool
	Diamond string
	Marks   []svgMark
	// Glyph marks a failure (✕), retries (↻n) or a dead letter (⚠) after
	// the bar.
	Glyph      string
	GlyphX     float64
	GlyphClass string
	GlyphTitle string
	// Seq links the row to its event.
	Seq int64
}

type svgMark struct {
	X, Y1, Y2 float64
	Title     string
}

// drawTimeline lays out bars over time up to now, the end of bars still
// open. dead maps the seq of an activity's ActivityScheduled to the reason
// of its unresolved dead letter.
func drawTimeline(bars []timeline.Bar, now time.Time, dead map[int64]string) *svgTimeline {
	t := &svgTimeline{Width: svgWidth, PlotX: svgPlotX, PlotW: svgWidth - svgPlotX - svgPlotRight,
		AxisY: svgTop - 12, TickTop: svgTop - 8, BarH: svgBar}
	if len(bars) > maxBars {
		t.More = len(bars) - maxBars
		bars = bars[:maxBars]
	}
	var t0, t1 time.Time
	widen := func(at time.Time) {
		if at.IsZero() {
			return
		}
		if t0.IsZero() || at.Before(t0) {
			t0 = at
		}
		if t1.IsZero() || at.After(t1) {
			t1 = at
		}
	}
	open := false
	for i := range bars {
		b := &bars[i]
		widen(b.Start)
		widen(b.End)
		for _, m := range b.Marks {
			widen(m.At)
		}
		if b.Open() {
			open = true
		}
	}
	if open && !now.IsZero() && now.After(t1) {
		t1 = now
	}
	if !t1.After(t0) {
		t1 = t0.Add(time.Second)
	}
	span := t1.Sub(t0)
	x := func(at time.Time) float64 {
		if at.Before(t0) {
			at = t0
		}
		if at.After(t1) {
			at = t1
		}
		return round(t.PlotX + float64(at.Sub(t0))/float64(span)*t.PlotW)
	}
	for i := 0; i <= 4; i++ {
		at := t0.Add(span * time.Duration(i) / 4)
		t.Ticks = append(t.Ticks, svgTick{X: x(at), Label: tickLabel(at, span)})
	}
	if open {
		t.NowX, t.HasNow = x(t1), true
	}
	counts := map[timeline.BarKind]int{}
	for i := range bars {
		b := &bars[i]
		counts[b.Kind]++
		top := svgTop + float64(i)*svgRowH
		r := svgRow{Y: top, BarY: top + (svgRowH-svgBar)/2, TextY: top + svgRowH/2 + 4, MidY: top + svgRowH/2,
			Label: timeline.Shorten(string(b.Kind)+" "+b.Name, 34), Seq: b.Seq,
			Class: "bar bar-" + string(b.Kind) + " outcome-" + string(b.Outcome)}
		end := b.End
		if b.Open() {
			end = t1
		}
		r.X = x(b.Start)
		r.W = max(round(x(end)-r.X), svgMinBar)
		if b.Kind == timeline.BarSignal {
			r.Instant = true
			m := r.MidY
			r.Diamond = fmt.Sprintf("%g,%g %g,%g %g,%g %g,%g", r.X, m-6, r.X+6, m, r.X, m+6, r.X-6, m)
			r.W = 6
		}
		for _, mk := range b.Marks {
			r.Marks = append(r.Marks, svgMark{X: x(mk.At), Y1: r.BarY - 3, Y2: r.BarY + svgBar + 3, Title: fmt.Sprintf("#%d %s: %s", mk.Seq, when(mk.At), mk.Label)})
		}
		r.GlyphX = r.X + r.W + 4
		switch {
		case dead[b.Seq] != "" && b.Open():
			r.Glyph, r.GlyphClass, r.GlyphTitle = "⚠", "glyph-dead", "dead letter: "+dead[b.Seq]
			r.Class += " dead"
		case b.Outcome == timeline.OutcomeFailed || b.Outcome == timeline.OutcomeTerminated:
			r.Glyph, r.GlyphClass, r.GlyphTitle = "✕", "glyph-failed", string(b.Outcome)+": "+b.Detail
			if b.Retried() {
				r.Glyph += " ↻" + strconv.Itoa(b.Attempts)
				r.GlyphTitle += " (after " + plural(b.Attempts, "attempt") + ")"
			}
		case b.Retried():
			r.Glyph, r.GlyphClass, r.GlyphTitle = "↻"+strconv.Itoa(b.Attempts), "glyph-retried", plural(b.Attempts, "attempt")
		}
		r.Title = barTitle(b, dead[b.Seq])
		t.Rows = append(t.Rows, r)
	}
	t.TickBottom = svgTop + float64(len(t.Rows))*svgRowH
	t.Height = t.TickBottom + svgLegendH
	t.LegendY = t.Height - 10
	t.LegendBoxY = t.LegendY - 9
	lx := 8.0
	for _, l := range []struct{ class, label string }{
		{"bar-execution", "execution"}, {"bar-activity", "activity"}, {"bar-timer", "timer"},
		{"bar-sub-workflow", "sub-workflow"}, {"bar-task", "human task"}, {"bar-signal", "signal"},
		{"outcome-failed", "failed"}, {"outcome-open", "open"},
	} {
		t.Legend = append(t.Legend, svgLegend{X: lx, TextX: lx + 16, Class: l.class, Label: l.label})
		lx += 16 + 7*float64(len(l.label)) + 14
	}
	var parts []string
	for _, k := range []timeline.BarKind{timeline.BarExecution, timeline.BarActivity, timeline.BarTimer,
		timeline.BarSubWorkflow, timeline.BarTask, timeline.BarSignal, timeline.BarSignalSent} {
		if n := counts[k]; n > 0 {
			parts = append(parts, plural(n, string(k)))
		}
	}
	t.Summary = "Timeline from " + when(t0) + " to " + when(t1) + ": " + strings.Join(parts, ", ")
	return t
}

// barTitle describes a bar for its tooltip.
func barTitle(b *timeline.Bar, dead string) string {
	var s strings.Builder
	fmt.Fprintf(&s, "%s %s (#%d", b.Kind, b.Name, b.Seq)
	if b.EndSeq != 0 && b.EndSeq != b.Seq {
		fmt.Fprintf(&s, " → #%d", b.EndSeq)
	}
	s.WriteString(")\n" + when(b.Start))
	switch {
	case b.Kind == timeline.BarSignal:
	case b.Open():
		s.WriteString(" → now: open")
	default:
		fmt.Fprintf(&s, " → %s: %s", when(b.End), b.Outcome)
	}
	if b.Attempts > 1 {
		s.WriteString(" after " + plural(b.Attempts, "attempt"))
	}
	if !b.Due.IsZero() {
		s.WriteString("\ndue " + when(b.Due))
	}
	if b.Detail != "" {
		s.WriteString("\n" + b.Detail)
	}
	if dead != "" {
		s.WriteString("\ndead letter: " + dead)
	}
	return s.String()
}

// tickLabel renders a time of the axis as precisely as the span needs.
func tickLabel(at time.Time, span time.Duration) string {
	at = at.UTC()
	switch {
	case span <= 2*time.Minute:
		return at.Format("15:04:05.000")
	case span <= time.Hour:
		return at.Format("15:04:05")
	case span <= 36*time.Hour:
		return at.Format("Jan 2 15:04")
	}
	return at.Format("2006-01-02")
}

// round keeps one decimal: the picture does not need more, and the SVG
// stays short.
func round(f float64) float64 {
	return float64(int64(f*10+0.5)) / 10
}
