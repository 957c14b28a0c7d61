package postgres

import "github.com/scimesh/scimesh/internal/store"

// PoolStats reports the store's pgxpool as one pool, "main". Connections
// being established count as open, neither in use nor idle.
func (s *Store) PoolStats() []store.PoolStats {
	st := s.pool.Stat()
	return []store.PoolStats{{
		Name: "main", Max: int(st.MaxConns()), Open: int(st.TotalConns()), InUse: int(st.AcquiredConns()),
		Idle: int(st.IdleConns()), Waits: st.EmptyAcquireCount(), WaitTime: st.EmptyAcquireWaitTime(),
	}}
}
