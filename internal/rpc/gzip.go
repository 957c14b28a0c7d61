package rpc

import (
	"compress/gzip"
	"fmt"
	"io"

	"connectrpc.com/connect"
)

// boundedGzip inflates a gzip message and stops past a bound: connect-go
// inflates up to its read limit and then reads on to tell the message's
// size, which for a gzip bomb means inflating all of it. This one fails
// instead, one byte past the limit, so a bomb costs what the limit allows.
type boundedGzip struct {
	zr    *gzip.Reader
	limit int64 // bytes it may yield: the message bound plus the one byte that shows it is over
	n     int64
}

// newBoundedGzip returns connect-go's decompressor factory for gzip
// messages of at most limit bytes.
func newBoundedGzip(limit int64) func() connect.Decompressor {
	return func() connect.Decompressor { return &boundedGzip{limit: limit + 1} }
}

func (d *boundedGzip) Read(p []byte) (int, error) {
	if d.zr == nil {
		return 0, io.EOF
	}
	if d.n >= d.limit {
		return 0, fmt.Errorf("the message inflates to more than %d bytes", d.limit-1)
	}
	if int64(len(p)) > d.limit-d.n {
		p = p[:d.limit-d.n]
	}
	n, err := d.zr.Read(p)
	d.n += int64(n)
	return n, err
}

func (d *boundedGzip) Close() error {
	if d.zr == nil {
		return nil
	}
	return d.zr.Close()
}

func (d *boundedGzip) Reset(r io.Reader) error {
	d.n = 0
	if d.zr == nil {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return err
		}
		d.zr = zr
		return nil
	}
	return d.zr.Reset(r)
}

// newGzipCompressor compresses answers as connect-go's own gzip does.
func newGzipCompressor() connect.Compressor { return gzip.NewWriter(nil) }
