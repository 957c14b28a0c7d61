package show

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/scimesh/scimesh/internal/client"
)

// Progress draws a job's progress on a terminal as one redrawn line, or,
// when its writer is not a terminal, as a line every few seconds.
type Progress struct {
	w       io.Writer
	tty     bool
	start   time.Time
	last    time.Time
	lastPct int
	drawn   bool
}

// NewProgress returns a Progress that draws on w.
func NewProgress(w io.Writer) *Progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &Progress{w: w, tty: tty, start: time.Now(), lastPct: -1}
}

const barWidth = 30

// Show draws j.
func (p *Progress) Show(j *client.Job) {
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

// Note writes msg on a line of its own, below the bar.
func (p *Progress) Note(msg string) {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
	fmt.Fprintln(p.w, msg)
}

// Done ends the bar's line: what is written next starts a line of its own.
func (p *Progress) Done() {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

// Follow follows job id with c until it is final, drawing its progress on
// w, and returns it.
func Follow(ctx context.Context, c *client.Client, id string, w io.Writer) (*client.Job, error) {
	p := NewProgress(w)
	defer p.Done()
	return c.Follow(ctx, id, p.Show, func(err error) { p.Note(fmt.Sprintf("coordinator unreachable, retrying: %v", err)) })
}
