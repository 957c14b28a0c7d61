package server

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/store/storeopen"
)

// Prune makes one retention pass, without serving, on the database at
// db and the blob store of blobs (or files under dataDir), and returns
// its report, which lists what it deleted even when it stopped part way.
// It works on a database that is there (a missing one is refused, not
// made) and on a blob store bound to it (or to none yet: the pass binds
// it); otherwise it deletes nothing.
func Prune(ctx context.Context, db, blobs, dataDir string, p engine.PruneExpiredParams) (*engine.PruneReport, error) {
	st, err := storeopen.Open(ctx, db, storeopen.Options{Existing: true})
	if err != nil {
		return nil, fmt.Errorf("prune works on an existing database (check --db or DATABASE_URL): %w", err)
	}
	defer st.Close()
	bs, err := storeopen.Blobs(ctx, blobs, dataDir)
	if err != nil {
		return nil, err
	}
	defer bs.Close()
	eng := engine.New(st, engine.Config{Blobs: bs, Logger: slog.New(slog.DiscardHandler)})
	if err := eng.CheckBlobStore(ctx); err != nil {
		return nil, fmt.Errorf("nothing was deleted: %w", err)
	}
	return eng.PruneExpired(ctx, p)
}
