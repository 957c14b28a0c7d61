// Package sqlite implements the storage contract (store.Store) on SQLite with
// modernc.org/sqlite, a pure-Go driver: no cgo, one file on disk.
//
// SQLite lets one writer in at a time, so the store does not pretend
// otherwise: every write and every transaction runs on one connection, whose
// transactions begin IMMEDIATE (they take the write lock up front and never
// fail to upgrade a read lock halfway). Reads made outside a transaction run
// on a separate pool of read-only connections and, in WAL mode, neither wait
// for the writer nor hold it up. Statements are prepared once and reused.
//
// Writes take turns at that connection in the order they ask, and those
// queued together are committed together (group commit): one goroutine
// runs each caller's transaction in a savepoint of its own within one
// SQLite transaction and commits once, so that a failing caller undoes
// only its own writes, and a caller hears of success only once the COMMIT
// holding its writes has succeeded.
//
// Durability: the database runs in WAL mode with synchronous=NORMAL. A commit
// survives the process being killed (kill -9) at any point; after a power
// loss or an operating-system crash the last transactions before the failure
// may be rolled back, never half applied. synchronous=FULL would close that
// window at the cost of an fsync per commit.
//
// Times are stored as INTEGER microseconds since the Unix epoch (NULL for the
// zero time.Time) and read back in UTC.
//
// Several processes may open one file, but they take turns at its write lock:
// a statement waits up to busy_timeout (10 s) for another process's
// transaction, and a wait that runs out is store.ErrUnavailable. One process
// per file is the configuration the store is built for.
//
// Errors leave the store translated once, as PostgreSQL's do: a missing row
// comes back as store.ErrNotFound, a unique violation as
// store.ErrDuplicate, a read transaction that lost the race to write as
// store.ErrStale and a database busy or locked past busy_timeout as
// store.ErrUnavailable; the driver's error stays reachable with errors.As.
package sqlite
