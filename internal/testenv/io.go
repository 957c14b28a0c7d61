package testenv

import (
	"bytes"
	"io"
	"sync"
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
