package console

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/internal/timeline"
)

func TestDrawTimeline(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	bars := []timeline.Bar{
		{Kind: timeline.BarExecution, Name: "loan", Seq: 1, Start: t0, Outcome: timeline.OutcomeOpen},
		{Kind: timeline.BarActivity, Name: "check", Seq: 3, EndSeq: 4, Start: t0, End: t0, Outcome: timeline.OutcomeCompleted, Attempts: 3},
		{Kind: timeline.BarTimer, Name: "cooling-off", Seq: 5, EndSeq: 6, Start: t0, End: t0.Add(time.Hour), Outcome: timeline.OutcomeCompleted},
		{Kind: timeline.BarActivity, Name: "pay", Seq: 7, Start: t0.Add(time.Hour), Outcome: timeline.OutcomeOpen},
		{Kind: timeline.BarSignal, Name: "docs", Seq: 8, EndSeq: 8, Start: t0.Add(90 * time.Minute), End: t0.Add(90 * time.Minute), Outcome: timeline.OutcomeCompleted},
	}
	now := t0.Add(2 * time.Hour)
	tl := drawTimeline(bars, now, map[int64]string{7: "unknown-activity: not deployed"})
	require.Len(t, tl.Rows, 5)
	end := tl.PlotX + tl.PlotW
	half := tl.PlotX + tl.PlotW/2

	require.Equal(t, tl.PlotX, tl.Rows[0].X)
	require.Equal(t, end-tl.PlotX, tl.Rows[0].W, "an open bar reaches now, the end of the axis")
	require.True(t, tl.HasNow)
	require.Equal(t, end, tl.NowX)

	require.Equal(t, svgMinBar, tl.Rows[1].W, "an instant activity is still visible")
	require.Equal(t, "↻3", tl.Rows[1].Glyph)
	require.Equal(t, half-tl.PlotX, tl.Rows[2].W, "an hour of two")
	require.Equal(t, half, tl.Rows[3].X)
	require.Equal(t, "⚠", tl.Rows[3].Glyph, "the dead letter is marked")
	require.Contains(t, tl.Rows[3].Class, "dead")
	require.Contains(t, tl.Rows[3].Title, "dead letter: unknown-activity: not deployed")
	require.True(t, tl.Rows[4].Instant)
	require.NotEmpty(t, tl.Rows[4].Diamond)
	require.Equal(t, "Timeline from 2026-11-22 09:00:00 to 2026-11-22 11:00:00: 1 execution, 2 activities, 1 timer, 1 signal", tl.Summary)
	require.Len(t, tl.Ticks, 5)
	require.Equal(t, "Nov 22 09:00", tl.Ticks[0].Label)
	require.Equal(t, "Nov 22 11:00", tl.Ticks[4].Label)
	require.Equal(t, tl.TickBottom+svgLegendH, tl.Height)

	// Nothing but one instant: a one-second axis; no open bar, no now.
	one := drawTimeline(bars[1:2], now, nil)
	require.False(t, one.HasNow)
	require.Equal(t, "09:00:00.000", one.Ticks[0].Label)
	require.Equal(t, "09:00:01.000", one.Ticks[4].Label)

	many := make([]timeline.Bar, maxBars+7)
	for i := range many {
		many[i] = timeline.Bar{Kind: timeline.BarActivity, Name: "a", Seq: int64(i + 1), Start: t0, End: t0, Outcome: timeline.OutcomeCompleted}
	}
	capped := drawTimeline(many, now, nil)
	require.Len(t, capped.Rows, maxBars)
	require.Equal(t, 7, capped.More)

	empty := drawTimeline(nil, now, nil)
	require.Empty(t, empty.Rows)
}
