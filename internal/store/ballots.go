package store

import (
	"encoding/json"
	"fmt"

	"github.com/scimesh/scimesh/internal/domain"
)

// EncodeBallots is the JSON a task's ballots are stored as: nil (NULL)
// for a task without any.
func EncodeBallots(bs []domain.Ballot) []byte {
	if len(bs) == 0 {
		return nil
	}
	b, err := json.Marshal(bs)
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
	var bs []domain.Ballot
	if err := json.Unmarshal(b, &bs); err != nil {
		return nil, fmt.Errorf("ballots: %w", err)
	}
	return bs, nil
}
