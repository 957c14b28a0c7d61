package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/scimesh/scimesh/internal/blob"
)

// The blob store is bound to one database (blob.Store.Bind): the first
// upload or sweep writes the store's marker naming this database's
// installation ID, and a store whose marker names another database is
// neither swept nor written to. A sweep removes the blobs no row of its
// own database names, so this database's sweep of another's store would
// remove every upload of the other, and an upload of this one into it
// would be removed by the other's sweep an hour later. Everything else
// (claims, results, jobs over uploads already there) goes on.

// blobOwner is what the engine knows of its blob store's binding.
type blobOwner struct {
	bound   atomic.Bool // a check found the store this database's
	refused atomic.Bool // the last check found it another's (logged once)
}

// CheckBlobStore binds the blob store to this database at its first use,
// and returns the *blob.ForeignError of a store bound to another. A
// refusal is logged once, when it is first found, and the end of one
// likewise. Without a blob store there is nothing to check.
func (e *Engine) CheckBlobStore(ctx context.Context) error {
	if e.cfg.Blobs == nil {
		return nil
	}
	id, err := e.store.InstallationGet(ctx)
	if err != nil {
		return mapStoreErr(fmt.Errorf("read the database's installation ID: %w", err))
	}
	err = e.cfg.Blobs.Bind(ctx, id)
	var foreign *blob.ForeignError
	if errors.As(err, &foreign) {
		e.blobOwner.bound.Store(false)
		if !e.blobOwner.refused.Swap(true) {
			e.log.ErrorContext(ctx, "the blob store belongs to another database: uploads are refused and orphan files are not swept until it is fixed",
				"error", err)
		}
		return err
	}
	if err != nil {
		return fmt.Errorf("bind the blob store to this database: %w", err)
	}
	e.blobOwner.bound.Store(true)
	if e.blobOwner.refused.Swap(false) {
		e.log.InfoContext(ctx, "the blob store is this database's: uploads and the sweep of orphan files go on", "store", e.cfg.Blobs.String())
	}
	return nil
}

// blobStoreOurs is CheckBlobStore once the store was found this
// database's: nothing to read then, until a check finds otherwise.
func (e *Engine) blobStoreOurs(ctx context.Context) error {
	if e.blobOwner.bound.Load() {
		return nil
	}
	return e.CheckBlobStore(ctx)
}
