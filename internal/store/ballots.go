package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
)

// storedBallot is a ballot as the store keeps it, in a JSON array in its
// chunk's row: short names, and times in microseconds since the Unix
// epoch (0 for none), so that the row stays small and reads without
// parsing times. Queries that look into ballots use these names.
type storedBallot struct {
	N int              `json:"n"`
	S domain.TaskState `json:"s"`
	A int              `json:"a,omitempty"` // attempt
	O string           `json:"o,omitempty"` // lease owner
	L int64            `json:"l,omitempty"` // leased at
	E int64            `json:"e,omitempty"` // lease expires at
	D int64            `json:"d,omitempty"` // attempt deadline
	V string           `json:"v,omitempty"` // voters
	R []byte           `json:"r,omitempty"` // result
	M json.RawMessage  `json:"m,omitempty"` // metrics
	X string           `json:"x,omitempty"` // error
	C int64            `json:"c"`           // created at
	U int64            `json:"u"`           // updated at
	F int64            `json:"f,omitempty"` // finished at
}

// EncodeBallots is what a task's ballots are stored as: nil (NULL) for a
// task without any.
func EncodeBallots(bs []domain.Ballot) []byte {
	if len(bs) == 0 {
		return nil
	}
	out := make([]storedBallot, len(bs))
	for i, b := range bs {
		out[i] = storedBallot{N: b.N, S: b.State, A: b.Attempt, O: b.LeaseOwner,
			L: micros(b.LeasedAt), E: micros(b.LeaseExpiresAt), D: micros(b.AttemptDeadline),
			V: b.Voters, R: b.Result, M: b.Metrics, X: b.Error,
			C: micros(b.CreatedAt), U: micros(b.UpdatedAt), F: micros(b.FinishedAt)}
	}
	b, err := json.Marshal(out)
	if err != nil {
		panic("store: ballots do not encode: " + err.Error()) // plain fields: cannot happen
	}
	return b
}

// DecodeBallots reads what EncodeBallots wrote.
func DecodeBallots(b []byte) ([]domain.Ballot, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var in []storedBallot
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("ballots: %w", err)
	}
	out := make([]domain.Ballot, len(in))
	for i, s := range in {
		out[i] = domain.Ballot{N: s.N, State: s.S, Attempt: s.A, LeaseOwner: s.O,
			LeasedAt: fromMicros(s.L), LeaseExpiresAt: fromMicros(s.E), AttemptDeadline: fromMicros(s.D),
			Voters: s.V, Result: s.R, Metrics: s.M, Error: s.X,
			CreatedAt: fromMicros(s.C), UpdatedAt: fromMicros(s.U), FinishedAt: fromMicros(s.F)}
	}
	return out, nil
}

// micros is t in microseconds since the Unix epoch, 0 for the zero time.
func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// fromMicros is the time of micros, in UTC.
func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// storedSecond is a task's second lease as the store keeps it, in JSON,
// with the names and times of storedBallot.
type storedSecond struct {
	O string `json:"o"`
	A int    `json:"a"`
	L int64  `json:"l,omitempty"`
	E int64  `json:"e,omitempty"`
	D int64  `json:"d,omitempty"`
}

// EncodeSecondLease is what a task's second lease is stored as: nil
// (NULL) for a task without one.
func EncodeSecondLease(s *domain.SecondLease) []byte {
	if s == nil {
		return nil
	}
	b, err := json.Marshal(storedSecond{O: s.Owner, A: s.Attempt, L: micros(s.LeasedAt), E: micros(s.ExpiresAt), D: micros(s.Deadline)})
	if err != nil {
		panic("store: a second lease does not encode: " + err.Error()) // plain fields: cannot happen
	}
	return b
}

// DecodeSecondLease reads what EncodeSecondLease wrote.
func DecodeSecondLease(b []byte) (*domain.SecondLease, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var s storedSecond
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("second lease: %w", err)
	}
	return &domain.SecondLease{Owner: s.O, Attempt: s.A, LeasedAt: fromMicros(s.L), ExpiresAt: fromMicros(s.E), Deadline: fromMicros(s.D)}, nil
}
