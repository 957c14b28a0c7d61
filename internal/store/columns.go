package store

import (
	"encoding/json"
	"fmt"
)

// EncodeColumns is what a job's joined input columns are stored as: a
// JSON array of their names, or "" for a job without any.
func EncodeColumns(names []string) string {
	if len(names) == 0 {
		return ""
	}
	b, err := json.Marshal(names)
	if err != nil {
		panic("store: column names do not encode: " + err.Error()) // strings: cannot happen
	}
	return string(b)
}

// DecodeColumns reads what EncodeColumns wrote.
func DecodeColumns(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var names []string
	if err := json.Unmarshal([]byte(s), &names); err != nil {
		return nil, fmt.Errorf("job columns: %w", err)
	}
	return names, nil
}
