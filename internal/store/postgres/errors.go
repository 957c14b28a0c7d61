package postgres

import (
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/scimesh/scimesh/internal/store"
)

// SQLSTATE codes the store translates.
const (
	codeUniqueViolation      = "23505"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeLockNotAvailable     = "55P03"
	codeAdminShutdown        = "57P01"
	codeCrashShutdown        = "57P02"
	codeCannotConnectNow     = "57P03"
)

// translate is how an error leaves the store, once (store.Wrap), with
// the contract's sentinel for err.
func translate(err error, format string, args ...any) error {
	return store.Wrap("postgres", sentinelOf(err), err, format, args...)
}

// sentinelOf is the contract's sentinel for err, or nil.
func sentinelOf(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeSerializationFailure, codeDeadlockDetected, codeLockNotAvailable:
			return store.ErrStale
		case codeUniqueViolation:
			return store.ErrDuplicate
		case codeAdminShutdown, codeCrashShutdown, codeCannotConnectNow:
			return store.ErrUnavailable
		}
		// Class 08: connection exception; class 53: insufficient resources
		// (too many connections, out of memory or disk).
		if strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "53") {
			return store.ErrUnavailable
		}
		return nil
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err) || isClosedPool(err) {
		return store.ErrUnavailable
	}
	return nil
}

// isClosedPool reports the error of a pool used after Close; pgxpool
// returns its pool library's error, which it does not export.
func isClosedPool(err error) bool {
	return strings.Contains(err.Error(), "closed pool")
}
