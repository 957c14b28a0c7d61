// Package client is the Go client of SciMesh's REST API (the HTTP API of the
// product contract): the calls of users (upload, jobs, results, task info
// and logs) and of workers (claim, input download, heartbeat, result,
// failure, logs). The CLI commands and the worker daemon are built on it.
//
// A Client is safe for concurrent use and keeps connections alive between
// calls. It sends the one bearer token it was given, and only to the
// coordinator it was pointed at: below its base URL (scheme, host, port and
// path prefix), and for a task's input only to the URL the coordinator
// issues for it. Anything else — an input URL on a data server or on
// another application behind the same proxy, a redirect out of the base
// URL — goes without the token.
//
// The client does not retry. Every failure comes back as an error: an answer
// of the coordinator other than success is a *Error carrying the HTTP status
// and the contract's error code and message; anything else (the network, a
// cancelled context) is returned wrapped. IsRetryable, IsLeaseLost,
// IsCancelled and IsNotFound sort them, so that callers such as the worker
// decide what to do with their own backoff.
//
// JSON answers are decoded leniently (unknown fields are ignored), so a
// newer coordinator that adds fields keeps working with an older client.
package client
