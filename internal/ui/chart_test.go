package ui

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestChart(t *testing.T) {
	t.Parallel()
	counts := make([]int, chartBuckets)
	for i := range 100 { // 1000 completions over the first third
		counts[i] = 10
	}
	c := newChart(counts, 2000, time.Hour)
	if c.Done != 1000 || c.Total != 2000 || c.Span != "1h" {
		t.Fatalf("chart of %d/%d over %s, want 1000/2000 over 1h", c.Done, c.Total, c.Span)
	}
	pts := strings.Fields(c.Points)
	if len(pts) != 2+2*100 {
		t.Fatalf("%d points for 100 steps; want a start, two per step and an end", len(pts))
	}
	lastX, lastY := -1.0, chartH+1
	for _, p := range pts {
		xs, ys, _ := strings.Cut(p, ",")
		x, _ := strconv.ParseFloat(xs, 64)
		y, _ := strconv.ParseFloat(ys, 64)
		if x < lastX || y > lastY {
			t.Fatalf("point %s goes back after (%v,%v): completions only grow", p, lastX, lastY)
		}
		lastX, lastY = x, y
	}
	if lastX != chartW || lastY != chartH/2 {
		t.Fatalf("chart ends at (%v,%v), want (%v,%v): half the chunks done", lastX, lastY, chartW, chartH/2)
	}
	if c := newChart(make([]int, chartBuckets), 0, time.Second); c.Points != "0,160.0 600.0,160.0" {
		t.Fatalf("chart of a job with no chunk done: %q, want a flat line", c.Points)
	}
}

// TestChartAxes: the time axis counts in s, min or h as the span asks,
// with round ticks from 0 placed in proportion; the chunks axis in whole
// chunks from 0 to at most the total.
func TestChartAxes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		span   time.Duration
		total  int
		title  string
		xticks string // label@place …
		yticks string
	}{
		{time.Minute, 10, "time since the job was created (s)", "0@0 10@100 20@200 30@300 40@400 50@500 60@600", "0@160 5@80 10@0"},
		{90 * time.Second, 3, "time since the job was created (s)", "0@0 20@133.3 40@266.7 60@400 80@533.3", "0@160 1@106.7 2@53.3 3@0"},
		{45 * time.Minute, 2000, "time since the job was created (min)", "0@0 10@133.3 20@266.7 30@400 40@533.3", "0@160 500@120 1000@80 1500@40 2000@0"},
		{5 * time.Hour, 7, "time since the job was created (h)", "0@0 1@120 2@240 3@360 4@480 5@600", "0@160 2@114.3 4@68.6 6@22.9"},
		{1500 * time.Millisecond, 0, "time since the job was created (s)", "0@0 0.5@200 1@400 1.5@600", "0@160 1@0"},
	} {
		ch := newChart(make([]int, chartBuckets), c.total, c.span)
		ticks := func(ts []tick) string {
			var out []string
			for _, tk := range ts {
				out = append(out, tk.Label+"@"+strconv.FormatFloat(tk.At, 'f', -1, 64))
			}
			return strings.Join(out, " ")
		}
		if ch.XTitle != c.title || ticks(ch.XTicks) != c.xticks || ticks(ch.YTicks) != c.yticks {
			t.Errorf("axes over %v and %d chunks: %q, x %q, y %q; want %q, x %q, y %q", c.span, c.total,
				ch.XTitle, ticks(ch.XTicks), ticks(ch.YTicks), c.title, c.xticks, c.yticks)
		}
	}
}
