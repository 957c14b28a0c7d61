package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/scimesh/scimesh/internal/client"
)

// progress draws a job's progress on a terminal as one redrawn line, or,
// when w is not a terminal, as a line every few seconds.
type progress struct {
	w       io.Writer
	tty     bool
	start   time.Time
	last    time.Time
	lastPct int
	drawn   bool
}

func newProgress(w io.Writer) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progress{w: w, tty: tty, start: time.Now(), lastPct: -1}
}

const barWidth = 30

func (p *progress) show(j *client.Job) {
	pct := int(100 * j.Progress)
	filled := int(float64(barWidth) * j.Progress)
	line := fmt.Sprintf("[%s%s] %3d%%  %d/%d chunks  %s  %s",
		strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled), pct,
		j.Tasks.Completed, j.Tasks.Total, j.Status, time.Since(p.start).Round(100*time.Millisecond))
	switch {
	case p.tty:
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
		p.drawn = true
	case pct != p.lastPct && (time.Since(p.last) > 2*time.Second || j.Final()):
		fmt.Fprintln(p.w, line)
		p.last = time.Now()
		p.lastPct = pct
	}
}

func (p *progress) note(msg string) {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
	fmt.Fprintln(p.w, msg)
}

func (p *progress) done() {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}
