package sqlite

import "context"

var sqlInstallationGet = newStatement(`SELECT id FROM installation WHERE one = 1`)

// InstallationGet returns the database's installation ID, which migration
// 0016 made.
func (q *querier) InstallationGet(ctx context.Context) (string, error) {
	var id string
	if err := q.queryRow(ctx, false, func(r scanner) error { return r.Scan(&id) }, sqlInstallationGet); err != nil {
		return "", translate(err, "read the installation ID")
	}
	return id, nil
}
