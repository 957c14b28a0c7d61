package postgres

import "context"

const sqlInstallationGet = `SELECT id FROM installation WHERE one = 1`

// InstallationGet returns the database's installation ID, which migration
// 0016 made.
func (q *querier) InstallationGet(ctx context.Context) (string, error) {
	var id string
	if err := q.db.QueryRow(ctx, sqlInstallationGet).Scan(&id); err != nil {
		return "", translate(err, "read the installation ID")
	}
	return id, nil
}
