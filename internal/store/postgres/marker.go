package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// sqlJobListMarkers reads each job's row and its root task's by their
// primary keys.
const sqlJobListMarkers = `SELECT j.id, j.status, j.version, coalesce(t.version, 0), greatest(j.updated_at, t.updated_at)
FROM jobs j LEFT JOIN tasks t ON t.id = j.root_task_id
WHERE j.id = ANY($1) AND NOT j.creating`

// JobListMarkers returns the marker of each listed job that exists and is
// not creating, in one statement.
func (q *querier) JobListMarkers(ctx context.Context, ids []string) (map[string]store.JobMarker, error) {
	out := make(map[string]store.JobMarker, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := q.db.Query(ctx, sqlJobListMarkers, ids)
	if err != nil {
		return nil, translate(err, "read the markers of %d jobs", len(ids))
	}
	var id, status string
	var updated pgtype.Timestamptz
	var m store.JobMarker
	_, err = pgx.ForEachRow(rows, []any{&id, &status, &m.Version, &m.RootVersion, &updated}, func() error {
		m.Status, m.UpdatedAt = domain.JobStatus(status), timeOf(updated)
		out[id] = m
		return nil
	})
	if err != nil {
		return nil, translate(err, "read the markers of %d jobs", len(ids))
	}
	return out, nil
}
