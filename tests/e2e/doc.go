// Package e2e holds SciMesh's end-to-end tests. Most run the scimesh
// binary, built once by TestMain (with -race when the tests run with it),
// as real serve and worker processes and drive them over HTTP, gRPC and
// the CLI, on SQLite and PostgreSQL, with blobs in files or S3. The
// shared bodies of common_test.go run twice, against the binary and in
// process, through tests/framework.
//
// The package has no code outside its tests; cmd/scimesh keeps only the
// tests of its flags and wiring that need no running coordinator.
package e2e
