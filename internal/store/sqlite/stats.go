package sqlite

import (
	"database/sql"

	"github.com/scimesh/scimesh/internal/store"
)

// PoolStats reports the store's two connection pools: "writer", the one
// connection of every write and transaction, and "reader", the read-only
// connections of reads outside a transaction.
func (s *Store) PoolStats() []store.PoolStats {
	return []store.PoolStats{poolStats("writer", s.writer), poolStats("reader", s.reader)}
}

func poolStats(name string, db *sql.DB) store.PoolStats {
	st := db.Stats()
	return store.PoolStats{
		Name: name, Max: st.MaxOpenConnections, Open: st.OpenConnections, InUse: st.InUse, Idle: st.Idle,
		Waits: st.WaitCount, WaitTime: st.WaitDuration,
	}
}
