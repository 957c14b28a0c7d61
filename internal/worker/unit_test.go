package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLineWriter(t *testing.T) {
	t.Parallel()
	var lines []string
	w := &lineWriter{emit: func(s string) { lines = append(lines, s) }}
	long := strings.Repeat("x", maxLineBytes+10)
	for _, p := range []string{"one\r\ntw", "o\n", "\n", long[:100], long[100:] + "\nlast"} {
		_, _ = w.Write([]byte(p))
	}
	w.flush()
	want := []string{"one", "two", "", long[:maxLineBytes] + " […line cut at 8 KiB]", "last"}
	if !slices.Equal(lines, want) {
		t.Fatalf("lines %q, want %q", lines, want)
	}
	for i := range 30 {
		_, _ = fmt.Fprintf(w, "l%d\n", i)
	}
	tail := w.lastLines()
	if len(tail) != tailLines || tail[0] != "l10" || tail[len(tail)-1] != "l29" {
		t.Fatalf("last lines %q, want l10…l29", tail)
	}
}

func TestSafeName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"s0:01a2-0": "s0:01a2-0",
		"..":        "_..",
		".":         "_.",
		"":          "_",
		"../etc":    ".._etc",
		"a/b\x00c":  "a_b_c",
	} {
		if got := safeName(in); got != want {
			t.Errorf("safeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseWorkload(t *testing.T) {
	t.Parallel()
	wl, err := ParseWorkload("dock=/opt/dock --x=1")
	if err != nil || wl.Name != "dock" || wl.Command != "/opt/dock --x=1" || wl.Run != nil {
		t.Fatalf("ParseWorkload(dock=…) = %+v, %v", wl, err)
	}
	wl, err = ParseWorkload("tanimoto")
	if err != nil || wl.Name != "tanimoto" || wl.Command != "" || wl.Run == nil {
		t.Fatalf("ParseWorkload(tanimoto) = %+v, %v", wl, err)
	}
	for spec, want := range map[string]string{
		"nosuch":      "not a built-in (built-ins: tanimoto)",
		"x=":          "empty command",
		"bad name=ls": "the name must be",
		"=ls":         "the name must be",
	} {
		if _, err := ParseWorkload(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseWorkload(%q): error %v, want one saying %q", spec, err, want)
		}
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	b := backoff{min: 100 * time.Millisecond, max: 800 * time.Millisecond}
	for i, ceiling := range []time.Duration{100, 200, 400, 800, 800} {
		ceiling *= time.Millisecond
		d := b.next()
		if d < ceiling/2 || d > ceiling {
			t.Fatalf("wait %d is %v, want within [%v, %v]", i, d, ceiling/2, ceiling)
		}
	}
	b.reset()
	if d := b.next(); d > 100*time.Millisecond {
		t.Fatalf("after reset: %v", d)
	}
}

// TestShipperResendsSameBatch loses the answer to a batch of log lines
// (the coordinator stored it, the worker saw an error): the shipper sends
// the very same batch again, with the same offset, before the next one,
// so a coordinator that skips positions it holds stores every line once.
func TestShipperResendsSameBatch(t *testing.T) {
	t.Parallel()
	var (
		sent   []logBatch
		stored []string
		calls  int
	)
	sink := func(_ context.Context, b logBatch) error {
		calls++
		sent = append(sent, logBatch{offset: b.offset, lines: slices.Clone(b.lines)})
		// The coordinator: skip the positions it already holds.
		if skip := int64(len(stored)) - b.offset; skip < int64(len(b.lines)) {
			stored = append(stored, b.lines[max(skip, 0):]...)
		}
		if calls == 1 {
			return fmt.Errorf("%w: the answer was lost", errLogLater)
		}
		return nil
	}
	s := newShipper(sink, "w", slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour, 2)
	for _, l := range []string{"a", "b", "c"} {
		s.add(l)
	}
	s.ship(t.Context(), false) // a,b sent; the answer lost: kept for later
	s.add("d")
	s.ship(t.Context(), true) // a,b again, then c,d
	want := []logBatch{{0, []string{"a", "b"}}, {0, []string{"a", "b"}}, {2, []string{"c", "d"}}}
	if len(sent) != len(want) {
		t.Fatalf("sent %+v, want %+v", sent, want)
	}
	for i := range want {
		if sent[i].offset != want[i].offset || !slices.Equal(sent[i].lines, want[i].lines) {
			t.Fatalf("batch %d sent as %+v, want %+v (all: %+v)", i, sent[i], want[i], sent)
		}
	}
	if got := strings.Join(stored, ","); got != "a,b,c,d" {
		t.Fatalf("stored %s, want a,b,c,d once each", got)
	}
}
