package ui

import (
	"bytes"
	"encoding/csv"
	"errors"
	"net/http"

	"github.com/scimesh/scimesh/internal/domain"
)

// bestShown is how many of a job's best rows so far its page shows.
const bestShown = 10

// bestRows is the head of a job's result so far: its header and best rows
// over the chunks completed, as the final CSV will have them.
type bestRows struct {
	Header []string   `json:"header"`
	Rows   [][]string `json:"rows"`
	Done   int        `json:"done"`  // chunks merged
	Total  int        `json:"total"` // the job's chunks
}

// best reads the best rows of job id so far. Outputs that cannot be
// merged (the stitch will fail the job with why) show none.
func (u *UI) best(r *http.Request, id string) (*bestRows, error) {
	p, err := u.e.PeekJobResult(r.Context(), id, bestShown)
	if errors.Is(err, domain.ErrConflict) {
		return &bestRows{}, nil
	}
	if err != nil {
		return nil, err
	}
	b := &bestRows{Done: p.ChunksDone, Total: p.ChunksTotal}
	if len(p.CSV) == 0 {
		return b, nil
	}
	recs, err := csv.NewReader(bytes.NewReader(p.CSV)).ReadAll()
	if err != nil {
		return nil, err
	}
	b.Header, b.Rows = recs[0], recs[1:]
	return b, nil
}
