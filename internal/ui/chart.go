package ui

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/scimesh/scimesh/internal/engine"
)

// chart is a job's completed chunks over time, drawn as an SVG polyline
// over two labelled axes: time since the job was created (in s, min or
// h, whichever suits the span) and chunks completed.
type chart struct {
	Points string // the polyline's points
	Span   string // how long the x axis spans
	Total  int
	Done   int
	XTicks []tick // along the time axis
	XTitle string // the time axis' title, with its unit
	YTicks []tick // along the chunks axis
}

// tick is a labelled mark on an axis: At is its place in the plot's
// coordinates (x from the left, y from the top).
type tick struct {
	At    float64 `json:"at"`
	Label string  `json:"label"`
}

// Caption says what the chart shows.
func (c *chart) Caption() string {
	return fmt.Sprintf("%d of %d chunks over %s since the job was created.", c.Done, c.Total, c.Span)
}

const (
	chartW, chartH = 600.0, 160.0
	chartBuckets   = 300 // steps of the x axis
)

// chart draws job j's chart from its completions counted by the database
// in chartBuckets steps from its creation to its end (or now).
func (u *UI) chart(r *http.Request, j *engine.JobView) (*chart, error) {
	end := j.FinishedAt
	if end.IsZero() {
		end = time.Now()
	}
	width := max(end.Sub(j.CreatedAt)/chartBuckets+1, time.Millisecond)
	counts, err := u.e.CountFinishedTasks(r.Context(), j.ID, j.CreatedAt, width, chartBuckets)
	if err != nil {
		return nil, err
	}
	return newChart(counts, j.Tasks.Total, width*chartBuckets), nil
}

// newChart plots the running count of completed chunks, counts[i] of them
// in the i-th step of the x axis, which spans span.
func newChart(counts []int, total int, span time.Duration) *chart {
	c := &chart{Total: total, Span: spanText(span)}
	top := max(total, 1)
	y := func(done int) float64 {
		return chartH - chartH*float64(min(done, top))/float64(top)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "0,%.1f", chartH)
	for i, n := range counts {
		if n == 0 {
			continue
		}
		x := chartW * float64(i+1) / float64(len(counts))
		fmt.Fprintf(&b, " %.1f,%.1f %.1f,%.1f", x, y(c.Done), x, y(c.Done+n))
		c.Done += n
	}
	fmt.Fprintf(&b, " %.1f,%.1f", chartW, y(c.Done))
	c.Points = b.String()

	unit, per := timeUnit(span)
	extent := span.Seconds() / per
	c.XTitle = "time since the job was created (" + unit + ")"
	step := niceStep(extent, 6)
	for k := 0; float64(k)*step <= extent*(1+1e-9); k++ {
		v := float64(k) * step
		c.XTicks = append(c.XTicks, tick{At: round1(chartW * v / extent), Label: strconv.FormatFloat(round1(v), 'f', -1, 64)})
	}
	ystep := max(niceStep(float64(top), 4), 1)
	for k := 0; float64(k)*ystep <= float64(top); k++ {
		v := float64(k) * ystep
		c.YTicks = append(c.YTicks, tick{At: round1(chartH - chartH*v/float64(top)), Label: strconv.Itoa(int(v))})
	}
	return c
}

// timeUnit is the unit the time axis counts span in, and its seconds.
func timeUnit(span time.Duration) (string, float64) {
	switch {
	case span < 2*time.Minute:
		return "s", 1
	case span < 2*time.Hour:
		return "min", 60
	}
	return "h", 3600
}

// niceStep is the step between ticks on an axis from 0 to extent: the
// least of 1, 2 or 5 times a power of ten that makes at most ticks steps.
func niceStep(extent float64, ticks int) float64 {
	if extent <= 0 {
		return 1
	}
	raw := extent / float64(ticks)
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*pow >= raw {
			return m * pow
		}
	}
	return 10 * pow
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }
