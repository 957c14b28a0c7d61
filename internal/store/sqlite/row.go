package sqlite

import (
	"database/sql"
	"encoding/json"
	"time"
)

// Conversions between Go values and columns. The contract stores a zero
// time as NULL; times are INTEGER microseconds since the Unix epoch.

// timeArg is t as unix microseconds, or NULL for the zero time.
func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// timeOf reads a column written by timeArg.
func timeOf(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMicro(v.Int64).UTC()
}

// bytesArg is b, NULL when nil.
func bytesArg(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// jsonArg is b, a JSON value, as TEXT, NULL when nil.
func jsonArg(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// textArg is s, NULL when empty.
func textArg(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// boolArg is b as SQLite stores booleans, 1 or 0.
func boolArg(b bool) int {
	if b {
		return 1
	}
	return 0
}

// limitArg is a LIMIT value: -1 (no limit) for 0 or less.
func limitArg(limit int) int {
	if limit <= 0 {
		return -1
	}
	return limit
}

// jsonArray encodes strings as a JSON array, for json_each.
func jsonArray(ss []string) string {
	b, _ := json.Marshal(ss) // strings always encode
	return string(b)
}
