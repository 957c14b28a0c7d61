// Package httpapi is SciMesh's REST API: the routes of the product contract,
// each registered behind the auth gate with its role and body bound,
// strict JSON decoding, and the one table that maps domain errors to HTTP
// status codes and error codes. It holds no rules of its own; every
// operation is the engine's.
package httpapi
