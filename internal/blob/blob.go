// Package blob is SciMesh's one seam for large bytes — normalized uploads:
// a blob is written as a stream under a name, read back by byte range,
// listed for sweeping and deleted. A blob exists whole or not at all, even
// across a crash of the process writing it.
//
// Two stores implement it: Dir, files under a directory (the default,
// under the data directory), and Bucket, an S3-compatible object store
// (s3://BUCKET[/PREFIX]?endpoint=URL&region=REGION), which can also hand
// out a time-limited URL for a byte range of a blob (Presigner), so that
// workers read chunks straight from the store. Coordinators that share a
// database must share the blob store: the database names blobs, the store
// holds them. With a bucket they need no shared file system.
package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// ErrNotFound reports a blob that is not in the store.
var ErrNotFound = errors.New("blob: not found")

// Store keeps blobs by name. A name is the one SciMesh gives an upload's
// blob, u- and 24 lower-case hex digits; a store reads, lists and removes
// only blobs so named, and lists only the leftovers of its own writes, so
// that a bucket or directory shared with other things is never swept of
// them.
type Store interface {
	// Create starts the blob named key. Nothing can be read or listed
	// under key until the Writer's Commit; Abort, or a Commit that
	// failed, leaves nothing behind.
	Create(ctx context.Context, key string) (Writer, error)
	// OpenRange reads length bytes of the blob named key from offset
	// (a negative length: to its end). A missing blob is ErrNotFound.
	OpenRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	// List calls fn with the blobs in pages of at most 512, in no
	// particular order, until fn returns an error (which List returns)
	// or every blob was listed. Blobs added or removed meanwhile may or
	// may not be listed.
	List(ctx context.Context, fn func(page []Info) error) error
	// Remove deletes the blob named key; a blob already gone is no error.
	Remove(ctx context.Context, key string) error
	// ListTemp is List for the leftovers of blobs being written, or of
	// writes a process that died never finished: temporary files, or
	// unfinished multipart uploads. Info.Key is the name RemoveTemp takes.
	ListTemp(ctx context.Context, fn func(page []Info) error) error
	// RemoveTemp deletes a leftover ListTemp named; one already gone is
	// no error.
	RemoveTemp(ctx context.Context, name string) error
	// Bind binds the store to the database whose installation ID is id:
	// the first call on a store writes its marker (MarkerName) naming
	// id; every call reads the marker, and returns a *ForeignError when
	// it names another database.
	Bind(ctx context.Context, id string) error
	// Close releases the store's resources.
	Close() error
	// String says where the blobs are, for logs and error messages; it
	// holds no credentials.
	String() string
}

// Writer writes a new blob. Commit names it; Abort (or a Commit that
// failed) leaves nothing behind.
type Writer interface {
	io.Writer
	// Commit makes the blob whole and durable under its name and returns
	// its size.
	Commit() (int64, error)
	// Abort discards the blob unless it was committed; it is safe to call
	// more than once, and after Commit.
	Abort()
}

// Presigner is a Store that can sign a URL for a byte range of a blob, so
// that whoever holds the URL may read that range, and nothing else, until
// it expires, without credentials of their own.
type Presigner interface {
	PresignRange(ctx context.Context, key string, offset, length int64, expiry time.Duration) (*SignedRange, error)
}

// SignedRange is a signed GET of a byte range: the request must carry the
// Range header given, which the signature covers.
type SignedRange struct {
	URL   string
	Range string // the Range header's value, "bytes=FIRST-LAST"
}

// Info describes a stored blob, or a leftover of a blob being written.
type Info struct {
	Key     string // the blob's name; for a leftover, its name for RemoveTemp
	Size    int64  // 0 when unknown (an unfinished multipart upload)
	ModTime time.Time
}

// listPage is how many blobs List hands to its function at a time.
const listPage = 512

// keyRe is the shape of the names SciMesh gives blobs: u- and an
// upload's local ID, its creation time in milliseconds and six random
// bytes, all in lower-case hex.
var keyRe = regexp.MustCompile(`^u-[0-9a-f]{24}$`)

// checkKey refuses a name that is not a blob's.
func checkKey(key string) error {
	if !keyRe.MatchString(key) {
		return fmt.Errorf("blob: name %q is not a blob's (u- and 24 hex digits): %w", key, ErrNotFound)
	}
	return nil
}

// byteRange is the Range header of length bytes from offset.
func byteRange(offset, length int64) string {
	return fmt.Sprintf("bytes=%d-%d", offset, offset+length-1)
}

// Open opens the store rawURL names: empty for files under
// dataDir/blobs (created when needed), s3://… for a bucket (see
// OpenBucket).
func Open(ctx context.Context, rawURL, dataDir string) (Store, error) {
	switch {
	case rawURL == "":
		if dataDir == "" {
			return nil, errors.New("blob: no store: give a data directory or --blobs")
		}
		return OpenDir(filepath.Join(dataDir, "blobs"))
	case strings.HasPrefix(rawURL, "s3://"):
		return OpenBucket(ctx, rawURL)
	default:
		return nil, fmt.Errorf("blobs %q: the blob store is given as s3://BUCKET[/PREFIX]?endpoint=URL&region=REGION, or left empty for files under the data directory", redactURL(rawURL))
	}
}

// redactURL drops any user information from a URL given by an operator
// before it goes into a message.
func redactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	if _, host, ok := strings.Cut(rest, "@"); ok {
		return scheme + "://***@" + host
	}
	return raw
}
