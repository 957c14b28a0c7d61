package postgres

import (
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Conversions between domain values and column values. The contract stores
// a zero time as NULL, and times at microsecond precision in UTC.

// timeArg is the column value of t: NULL when zero.
func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// timeOf is the domain value of a timestamptz column: zero when NULL, else
// in UTC.
func timeOf(ts pgtype.Timestamptz) time.Time {
	if !ts.Valid {
		return time.Time{}
	}
	return ts.Time.UTC()
}

// normTime makes *t what the database stores and returns: UTC, truncated to
// the microsecond, so the struct written equals the row read back.
func normTime(t *time.Time) {
	if !t.IsZero() {
		*t = t.UTC().Truncate(time.Microsecond)
	}
}

// bytesArg is the column value of b: NULL when nil, so nil and empty
// round-trip apart.
func bytesArg(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// jsonbArg is the column value of a nullable jsonb: NULL for nil, else
// the JSON as it is.
func jsonbArg(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// textArg is the column value of a nullable text: NULL when empty.
func textArg(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// limitArg is a LIMIT value: NULL (no limit) for 0 or less.
func limitArg(n int) any {
	if n <= 0 {
		return nil
	}
	return n
}
