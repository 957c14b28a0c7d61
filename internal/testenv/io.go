package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
)

// Buffer is a bytes.Buffer that a logger or a process may write to from
// any goroutine while a test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// CountingReader counts the bytes read through it from R.
type CountingReader struct {
	R io.Reader
	N int64
}

// Read reads from R and counts.
func (c *CountingReader) Read(p []byte) (int, error) {
	n, err := c.R.Read(p)
	c.N += int64(n)
	return n, err
}

// Endless reads as an endless run of the byte b: a line, a record or a
// body that never ends.
type Endless byte

// Read fills p with b.
func (e Endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(e)
	}
	return len(p), nil
}

// Held reads R and counts what it read; past Hold bytes (0: never) it
// waits until Release, then fails. It is a body a server must answer
// without the rest of: the client's transport, which reads the answer
// while it sends, returns the answer however the server then closes.
type Held struct {
	R    io.Reader
	Hold int64

	read atomic.Int64
	once sync.Once
	done chan struct{}
}

// Read reads from R up to Hold bytes in all, then waits for Release.
func (h *Held) Read(p []byte) (int, error) {
	sent := h.read.Load()
	if h.Hold > 0 {
		if sent >= h.Hold {
			<-h.released()
			return 0, errors.New("released: the server answered")
		}
		p = p[:min(int64(len(p)), h.Hold-sent)]
	}
	n, err := h.R.Read(p)
	h.read.Add(int64(n))
	return n, err
}

// N is how many bytes were read so far.
func (h *Held) N() int64 { return h.read.Load() }

// Release lets a held Read end; releasing twice is no error.
func (h *Held) Release() {
	ch := h.released()
	select {
	case <-ch:
	default:
		close(ch)
	}
}

func (h *Held) released() chan struct{} {
	h.once.Do(func() { h.done = make(chan struct{}) })
	return h.done
}

// LastLines is the end of a process's or a server's output, short enough
// that the failure it explains stays in view at the end of a test run.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) <= n {
		return strings.Join(lines, "\n")
	}
	return fmt.Sprintf("[%d earlier lines left out]\n%s", len(lines)-n, strings.Join(lines[len(lines)-n:], "\n"))
}
