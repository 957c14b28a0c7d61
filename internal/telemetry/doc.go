// Package telemetry is how a coordinator is watched from outside: the
// Prometheus metrics served at GET /metrics, and the request middleware that
// gives every request an ID, times it and logs one line for it.
//
// Metrics are aggregates only. Their labels are drawn from small fixed sets
// (task kinds and states, HTTP methods, the server's route patterns,
// status codes, pool names): never a job, task or worker ID or name, so
// that the number of series stays bounded whatever the load. Counters
// count this process's work since it started; gauges of the database's
// content (tasks by state, the outbox) are read at scrape time and are the
// same on every replica sharing a database.
//
// The package is not the engine's: the engine reports what it does through
// its own small engine.Observer interface, which Metrics implements, and
// knows nothing of Prometheus.
package telemetry
