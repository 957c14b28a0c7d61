package table

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/scimesh/scimesh/internal/domain"
)

// Chunk is one task's share of a normalized table: whole records, as a
// byte range of the table. A worker downloads the table's header line
// followed by the range: len(Header)+Length bytes.
type Chunk struct {
	Offset int64             // where the chunk's first record starts in the table
	Length int64             // bytes of the chunk's records, the last '\n' included
	Rows   int               // records in the chunk
	SHA256 [sha256.Size]byte // of what a worker downloads: the header line, then the range
}

// Chunking is how Split divides a normalized table into chunks.
type Chunking struct {
	Header []byte  // the header line with its '\n'; empty when the table has none
	Rows   int64   // data rows in all chunks
	Chunks []Chunk // in table order; every one but the last holds chunkRows rows
}

// Split reads a table that Normalize wrote and divides its data rows into
// chunks of chunkRows records each, but for the last chunk, which holds the
// rest. With hasHeader the first record is the header line, which every
// chunk's download repeats and no chunk's range holds.
//
// Split reads r once, in order, in constant memory but for the header and
// the result. It relies on the canonical form: a record ends at an LF that
// is outside quotes, and every quote, escaped or not, toggles the quoting
// (a doubled quote toggles twice). Input that is not canonical as far as
// Split can tell, such as one that ends inside quotes or without a final
// LF, is an error that is no domain error: it is a fault of the caller.
//
// A table with no record is "the table is empty", and a header with no
// rows "the table has a header but no rows"; a chunkRows below 1, or one
// that makes more than domain.MaxChunks chunks, is refused too. Those
// errors wrap domain.ErrInvalidArgument.
func Split(r io.Reader, hasHeader bool, chunkRows int) (*Chunking, error) {
	if chunkRows < 1 {
		return nil, domain.Invalidf("chunk_rows is %d; it must be at least 1", chunkRows)
	}
	s := newSplitter(hasHeader, chunkRows, domain.MaxChunks)
	if err := s.read(r, splitBufSize); err != nil {
		return nil, err
	}
	return &s.res, nil
}

// splitBufSize is the size of Split's reads.
const splitBufSize = 1 << 20

// splitter is the state of one Split call, which lasts across reads.
type splitter struct {
	chunkRows int
	maxChunks int
	inHeader  bool // the header record has not ended yet
	inQuote   bool
	off       int64 // the table offset of the window's first byte
	last      byte  // the last byte read

	h          *chunkHasher // hashes each chunk's download
	chunkStart int64
	rows       int // rows in the current chunk so far

	res Chunking
}

func newSplitter(hasHeader bool, chunkRows, maxChunks int) *splitter {
	return &splitter{
		chunkRows: chunkRows,
		maxChunks: maxChunks,
		inHeader:  hasHeader,
		res:       Chunking{Header: []byte{}},
	}
}

func (s *splitter) read(r io.Reader, size int) (err error) {
	s.h = newChunkHasher(min(max(runtime.GOMAXPROCS(0), 1), 4))
	defer func() {
		sums := s.h.finish()
		if err == nil {
			for i := range s.res.Chunks {
				s.res.Chunks[i].SHA256 = sums[i]
			}
		}
	}()
	buf := make([]byte, size)
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if err := s.window(buf[:n]); err != nil {
				return err
			}
		}
		switch err {
		case nil:
			continue
		case io.EOF, io.ErrUnexpectedEOF:
			return s.end()
		default:
			return fmt.Errorf("split table: read: %w", err)
		}
	}
}

// window scans the next bytes of the table.
func (s *splitter) window(b []byte) error {
	hashed := 0 // b[:hashed] is accounted for in the header or the hash
	quote := s.nextQuote(b, 0)
	for i := 0; i < len(b); {
		nl := bytes.IndexByte(b[i:], '\n')
		if nl < 0 {
			break
		}
		end := i + nl // the LF
		for quote < end {
			s.inQuote = !s.inQuote
			quote = s.nextQuote(b, quote+1)
		}
		i = end + 1
		if s.inQuote {
			continue
		}
		// A record ends at b[i].
		if s.inHeader {
			s.res.Header = append(s.res.Header, b[hashed:i]...)
			hashed = i
			s.inHeader = false
			s.chunkStart = s.off + int64(i)
			s.h.Write(s.res.Header)
			continue
		}
		s.rows++
		if s.rows == s.chunkRows {
			s.h.Write(b[hashed:i])
			hashed = i
			if err := s.endChunk(s.off + int64(i)); err != nil {
				return err
			}
		}
	}
	// Quotes after the last LF of the window.
	for quote < len(b) {
		s.inQuote = !s.inQuote
		quote = s.nextQuote(b, quote+1)
	}
	if s.inHeader {
		s.res.Header = append(s.res.Header, b[hashed:]...)
	} else {
		s.h.Write(b[hashed:])
	}
	s.off += int64(len(b))
	s.last = b[len(b)-1]
	return nil
}

// nextQuote returns the index of the first quote in b[from:], or len(b).
func (s *splitter) nextQuote(b []byte, from int) int {
	if i := bytes.IndexByte(b[from:], '"'); i >= 0 {
		return from + i
	}
	return len(b)
}

// endChunk records the current chunk, which ends at table offset end, and
// starts the next.
func (s *splitter) endChunk(end int64) error {
	if len(s.res.Chunks) == s.maxChunks {
		return domain.Invalidf("the table makes more than %d chunks of %d rows; raise chunk_rows", s.maxChunks, s.chunkRows)
	}
	c := Chunk{Offset: s.chunkStart, Length: end - s.chunkStart, Rows: s.rows}
	s.h.endChunk() // its sum is filled in when the hashing is done
	s.res.Chunks = append(s.res.Chunks, c)
	s.res.Rows += int64(c.Rows)
	s.chunkStart, s.rows = end, 0
	s.h.Write(s.res.Header)
	return nil
}

// end checks the end of the table and records the last chunk.
func (s *splitter) end() error {
	switch {
	case s.off == 0:
		return domain.Invalidf("the table is empty")
	case s.inQuote || s.last != '\n':
		return fmt.Errorf("split table: the table is not normalized: it ends inside a record at byte %d", s.off)
	}
	if s.rows > 0 {
		if err := s.endChunk(s.off); err != nil {
			return err
		}
	}
	if len(s.res.Chunks) == 0 {
		return domain.Invalidf("the table has a header but no rows")
	}
	return nil
}

// chunkHasher hashes chunks on several goroutines: chunk i on goroutine
// i mod n, so that each chunk's bytes are hashed in order while different
// chunks are hashed at once, and the scan goes on meanwhile. SHA-256 is what
// bounds Split; this spreads it over the cores.
type chunkHasher struct {
	queues []chan hashJob
	wg     sync.WaitGroup
	cur    int // the chunk being written

	mu   sync.Mutex
	sums [][sha256.Size]byte // by chunk
	pool sync.Pool           // of *[]byte
}

// hashJob is bytes of one chunk, or the end of that chunk.
type hashJob struct {
	chunk int
	data  *[]byte
	end   bool
}

func newChunkHasher(n int) *chunkHasher {
	c := &chunkHasher{queues: make([]chan hashJob, n)}
	for i := range c.queues {
		q := make(chan hashJob, 8)
		c.queues[i] = q
		c.wg.Go(func() {
			h := sha256.New()
			for j := range q {
				if !j.end {
					h.Write(*j.data)
					c.pool.Put(j.data)
					continue
				}
				var sum [sha256.Size]byte
				h.Sum(sum[:0])
				h.Reset()
				c.mu.Lock()
				for len(c.sums) <= j.chunk {
					c.sums = append(c.sums, [sha256.Size]byte{})
				}
				c.sums[j.chunk] = sum
				c.mu.Unlock()
			}
		})
	}
	return c
}

// Write adds p to the current chunk. It copies p, which the caller reuses.
func (c *chunkHasher) Write(p []byte) {
	if len(p) == 0 {
		return
	}
	b, _ := c.pool.Get().(*[]byte)
	if b == nil || cap(*b) < len(p) {
		nb := make([]byte, 0, max(len(p), 64<<10))
		b = &nb
	}
	*b = append((*b)[:0], p...)
	c.queues[c.cur%len(c.queues)] <- hashJob{chunk: c.cur, data: b}
}

// endChunk ends the current chunk; the next Write starts the next one.
func (c *chunkHasher) endChunk() {
	c.queues[c.cur%len(c.queues)] <- hashJob{chunk: c.cur, end: true}
	c.cur++
}

// finish waits for the hashing and returns the sums of the ended chunks.
func (c *chunkHasher) finish() [][sha256.Size]byte {
	for _, q := range c.queues {
		close(q)
	}
	c.wg.Wait()
	return c.sums
}
