package store

import "time"

// PoolStats is a snapshot of one of a store's database connection pools,
// for metrics. Stores that have pools report them with a PoolStats method
// (an optional behaviour: the interface is declared where it is used).
type PoolStats struct {
	// Name tells the pools of one store apart: "writer" and "reader" on
	// SQLite, "main" on PostgreSQL.
	Name string
	// Max is the most connections the pool opens; 0 when unbounded.
	Max int
	// Open counts the connections open now, in use or idle.
	Open int
	// InUse counts the connections handed out now.
	InUse int
	// Idle counts the open connections not in use.
	Idle int
	// Waits counts, since the pool opened, the times a caller found no
	// connection free and had to wait for one.
	Waits int64
	// WaitTime is the time callers spent waiting, since the pool opened.
	WaitTime time.Duration
}
