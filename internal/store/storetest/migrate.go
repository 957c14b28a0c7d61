package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// MigrateVotes: a vote under way when the database migrates to ballots
// (version 28), its replicas rows of their own, starts over: its chunk
// is pending again with a fresh budget of attempts, and its replicas'
// rows are gone; other chunks are as they were. down takes s's schema
// down to before version 28, up migrates it again, and exec runs a
// statement on s in between (the store's own writes need the new
// schema).
func MigrateVotes(t *testing.T, s store.Store, down, up func(), exec func(query string)) {
	t.Helper()
	ctx := t.Context()
	j := NewJob("j1", Epoch())
	tasks := NewTasks(j, 2)
	voted, other := tasks[1], tasks[2]
	other.State, other.Attempt, other.LeaseOwner, other.LeaseExpiresAt = domain.TaskLeased, 1, "w1", Epoch().Add(time.Hour)
	replicas := []*domain.Task{cloneTask(voted), cloneTask(voted)}
	for i, r := range replicas {
		r.ID, r.Kind = domain.ReplicaID(voted.ID, i+1), domain.KindReplica
	}
	err := s.InTx(ctx, func(q store.Querier) error {
		if err := q.JobInsert(ctx, j); err != nil {
			return err
		}
		return q.TaskInsert(ctx, append(tasks, replicas...))
	})
	if err != nil {
		t.Fatal(err)
	}
	down()
	exec("UPDATE tasks SET state = 'leased', lease_owner = '(quorum)', attempt = 2, voters = ',ada,' WHERE id = '" + voted.ID + "'")
	up()
	got, err := s.TaskGet(ctx, voted.ID)
	if err != nil || got.State != domain.TaskPending || got.Attempt != 0 || got.LeaseOwner != "" || got.Voters != "" || got.Ballots != nil {
		t.Errorf("the chunk voted on when migrated: %+v, %v; want pending again, attempt 0", got, err)
	}
	for _, r := range replicas {
		if _, err := s.TaskGet(ctx, r.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("replica %s after the migration: %v; want its row gone", r.ID, err)
		}
	}
	if got, err := s.TaskGet(ctx, other.ID); err != nil || got.State != domain.TaskLeased || got.LeaseOwner != "w1" {
		t.Errorf("a chunk leased to a worker when migrated: %+v, %v; want it as it was", got, err)
	}
}
