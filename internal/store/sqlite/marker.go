package sqlite

import (
	"context"
	"database/sql"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// sqlJobListMarkers reads each job's row and its root task's by their
// primary keys; the ID list is a JSON array, as in sqlJobMarkRunning.
var sqlJobListMarkers = newStatement(`SELECT j.id, j.status, j.version, coalesce(t.version, 0),
	nullif(max(coalesce(j.updated_at, 0), coalesce(t.updated_at, 0)), 0)
	FROM jobs j LEFT JOIN tasks t ON t.id = j.root_task_id
	WHERE j.id IN (SELECT value FROM json_each(?)) AND NOT j.creating`)

// JobListMarkers returns the marker of each listed job that exists and is
// not creating.
func (q *querier) JobListMarkers(ctx context.Context, ids []string) (map[string]store.JobMarker, error) {
	out := make(map[string]store.JobMarker, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	err := q.query(ctx, false, func(r scanner) error {
		var (
			id, status string
			updated    sql.NullInt64
			m          store.JobMarker
		)
		if err := r.Scan(&id, &status, &m.Version, &m.RootVersion, &updated); err != nil {
			return err
		}
		m.Status, m.UpdatedAt = domain.JobStatus(status), timeOf(updated)
		out[id] = m
		return nil
	}, sqlJobListMarkers, jsonArray(ids))
	if err != nil {
		return nil, translate(err, "read the markers of %d jobs", len(ids))
	}
	return out, nil
}
