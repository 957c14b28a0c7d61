// Package scimeshv1 holds the messages of SciMesh's gRPC and Connect API,
// package scimesh.v1: the Queue service for clients, Worker for workers and
// Internal between shards. Everything here but this file and the tests is
// generated from the .proto files beside it by `make proto`; the comments in
// those files are the API's documentation. The service stubs are in
// scimeshv1connect.
package scimeshv1
