package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// A store is bound to one database: its marker, an object beside the
// blobs named MarkerName, holds the installation ID of the database that
// first used it (see Store.Bind). The database names the blobs, so only
// that database may tell which of them no row needs any more.

// MarkerName is the name of a store's marker, in its directory or under
// its prefix. It is no blob's name, so no listing of blobs holds it.
const MarkerName = "scimesh-database"

// markerMax bounds how much of a marker is read: an installation ID is 32
// characters.
const markerMax = 256

// ForeignError reports a store bound to another database than the one
// that asked.
type ForeignError struct {
	Store  string // where the blobs are, as Store.String says
	Marker string // where the marker is
	Owner  string // the installation ID the marker names
	ID     string // the installation ID of the database that asked
}

func (e *ForeignError) Error() string {
	return fmt.Sprintf("blob store %s belongs to another SciMesh database: its marker %s names database %q, and this one is %q; "+
		"point --blobs (or --data-dir) at this database's store, or, if that database is gone, remove the marker",
		e.Store, e.Marker, e.Owner, e.ID)
}

// checkOwner is nil when the marker at marker, which holds data, names
// the database id; otherwise a *ForeignError.
func checkOwner(s Store, marker string, data []byte, id string) error {
	owner := strings.TrimSpace(string(data))
	if owner == id {
		return nil
	}
	return &ForeignError{Store: s.String(), Marker: marker, Owner: owner, ID: id}
}

// Bind binds the directory to the database id, unless it is bound
// already: the marker is written as a blob is, whole or not at all, and
// never replaced.
func (s *Dir) Bind(_ context.Context, id string) error {
	p := filepath.Join(s.dir, MarkerName)
	data, err := readFileMax(p)
	if errors.Is(err, os.ErrNotExist) {
		if err := s.writeMarker(p, id); err != nil {
			return err
		}
		data, err = readFileMax(p)
	}
	if err != nil {
		return fmt.Errorf("blob: read the marker %s: %w", p, err)
	}
	return checkOwner(s, p, data, id)
}

// writeMarker writes the marker p naming id unless there is one already.
func (s *Dir) writeMarker(p, id string) error {
	f, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), tempPattern)
	if err != nil {
		return fmt.Errorf("blob: write the marker: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(id + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(f.Name(), p) // fails if another process wrote one first, which is then the marker
	}
	if err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("blob: write the marker %s: %w", p, err)
	}
	if d, err := os.Open(s.dir); err == nil {
		_ = d.Sync() // make the link durable; best effort, as for a blob
		d.Close()
	}
	return nil
}

// readFileMax reads the file p, markerMax bytes of it at most.
func readFileMax(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, markerMax))
}

// Bind binds the bucket's prefix to the database id, unless it is bound
// already. The marker is written only if no object has its name (a
// conditional write; a store that ignores the condition keeps the last
// of two writes at once, which the read that follows each finds).
func (s *Bucket) Bind(ctx context.Context, id string) error {
	marker := "s3://" + s.name + "/" + s.prefix + MarkerName
	data, err := s.readMarker(ctx)
	if gcerrors.Code(err) == gcerrors.NotFound {
		err = s.b.WriteAll(ctx, MarkerName, []byte(id+"\n"), &gcblob.WriterOptions{ContentType: "text/plain", IfNotExist: true})
		if err != nil && gcerrors.Code(err) != gcerrors.FailedPrecondition {
			return s.wrap(err, "blob: write the marker %s", marker)
		}
		data, err = s.readMarker(ctx)
	}
	if err != nil {
		return s.wrap(err, "blob: read the marker %s", marker)
	}
	return checkOwner(s, marker, data, id)
}

// readMarker reads the marker, markerMax bytes of it at most.
func (s *Bucket) readMarker(ctx context.Context) ([]byte, error) {
	r, err := s.b.NewRangeReader(ctx, MarkerName, 0, markerMax, nil)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(r)
	return buf.Bytes(), err
}
