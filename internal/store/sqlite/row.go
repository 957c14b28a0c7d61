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

// timeCol reads a column written by timeArg.
func timeCol(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMicro(v.Int64).UTC()
}

// blobArg is b, NULL when nil.
func blobArg(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// textArg is b as TEXT, NULL when nil.
func textArg(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// nullString is s, NULL when empty.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func boolArg(b bool) int {
	if b {
		return 1
	}
	return 0
}

// limitArg is the LIMIT for limit; 0 or less is no limit.
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
