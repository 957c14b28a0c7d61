package tanimoto

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrBadInput reports a task that cannot succeed however often it runs: a
// malformed query parameter, or a chunk with a fingerprint of the wrong
// length or not in hex, a missing column, or malformed CSV. A worker reports
// it as a failure that is not retryable.
var ErrBadInput = errors.New("tanimoto: bad input")

// Name is the workload name that turns the built-in on.
const Name = "tanimoto"

// Query is a decoded query fingerprint. It is read-only once made, so one
// Query may serve many Scans at once.
type Query struct {
	digits int      // hex digits of the fingerprint
	words  []uint64 // the bits, as DecodeHex lays them out
}

// NewQuery decodes a query fingerprint: a non-empty, even number of hex
// digits. Errors wrap ErrBadInput.
func NewQuery(hex string) (*Query, error) {
	if hex == "" {
		return nil, fmt.Errorf("%w: parameter \"query\" is empty: give the query fingerprint in hex", ErrBadInput)
	}
	words, err := DecodeHex(nil, []byte(hex))
	if err != nil {
		return nil, fmt.Errorf("%w: parameter \"query\" is not a hex fingerprint: %s", ErrBadInput, hexProblem([]byte(hex)))
	}
	return &Query{digits: len(hex), words: words}, nil
}

// ParseQuery reads the query fingerprint from a task's parameters, a JSON
// object whose "query" member is the fingerprint in hex; other members are
// ignored. Errors wrap ErrBadInput.
func ParseQuery(params json.RawMessage) (*Query, error) {
	var p struct {
		Query *string `json:"query"`
	}
	if t := bytes.TrimSpace(params); len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("%w: parameters must be a JSON object with the member \"query\"", ErrBadInput)
	}
	if err := json.Unmarshal(params, &p); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return nil, fmt.Errorf("%w: parameter \"query\" must be a string of hex digits", ErrBadInput)
		}
		return nil, fmt.Errorf("%w: parameters are not valid JSON: %v", ErrBadInput, err)
	}
	if p.Query == nil {
		return nil, fmt.Errorf("%w: parameter \"query\" is missing: give the query fingerprint in hex", ErrBadInput)
	}
	return NewQuery(*p.Query)
}

// Digits returns the length of the query fingerprint in hex digits, which
// every fingerprint it is compared with must share.
func (q *Query) Digits() int { return q.digits }
