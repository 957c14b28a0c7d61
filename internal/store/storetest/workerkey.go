package storetest

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// exerciseWorkerKeys: a worker key reads back as written, by hash and in
// its account's list and everyone's; a name is taken once per account and
// a hash once; trust is set and a key deleted by (account, name), and
// either of a key that is not there is ErrNotFound; the leases of a key's
// workers are found by their lease owner's prefix, and only leased tasks.
func exerciseWorkerKeys(t *testing.T, newStore newFunc) {
	s := newStore(t)
	ctx := t.Context()
	keys := []*domain.WorkerKey{
		{Account: "alice", Name: "laptop", CreatedAt: Epoch()},
		{Account: "alice", Name: "a.b_c-d", Trusted: true, CreatedAt: Epoch()},
		{Account: "bob", Name: "laptop", CreatedAt: Epoch()},
	}
	for i, k := range keys {
		if err := s.WorkerKeyInsert(ctx, k, string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WorkerKeyInsert(ctx, &domain.WorkerKey{Account: "alice", Name: "laptop", CreatedAt: Epoch()}, "z"); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("a second key alice/laptop: %v, want ErrDuplicate", err)
	}
	if err := s.WorkerKeyInsert(ctx, &domain.WorkerKey{Account: "carol", Name: "x", CreatedAt: Epoch()}, "a"); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("a second key of hash a: %v, want ErrDuplicate", err)
	}
	if got, err := s.WorkerKeyGet(ctx, "c"); err != nil || !reflect.DeepEqual(got, keys[2]) {
		t.Errorf("WorkerKeyGet(c) = %+v, %v; want %+v", got, err, keys[2])
	}
	if _, err := s.WorkerKeyGet(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("WorkerKeyGet(nope): %v, want ErrNotFound", err)
	}
	if got, err := s.WorkerKeyList(ctx, "alice"); err != nil || !reflect.DeepEqual(got, []*domain.WorkerKey{keys[1], keys[0]}) {
		t.Errorf("WorkerKeyList(alice) = %v, %v; want a.b_c-d then laptop", got, err)
	}
	if got, err := s.WorkerKeyList(ctx, ""); err != nil || len(got) != 3 || got[2].Account != "bob" {
		t.Errorf("WorkerKeyList(everyone) = %v, %v; want alice's two then bob's", got, err)
	}

	if err := s.WorkerKeyTrust(ctx, "bob", "laptop", true); err != nil {
		t.Fatal(err)
	}
	if got, err := s.WorkerKeyGet(ctx, "c"); err != nil || !got.Trusted {
		t.Errorf("bob/laptop after WorkerKeyTrust: %+v, %v; want trusted", got, err)
	}
	if got, err := s.WorkerKeyGet(ctx, "a"); err != nil || got.Trusted {
		t.Errorf("alice/laptop after trusting bob's: %+v, %v; want untrusted still", got, err)
	}
	if err := s.WorkerKeyTrust(ctx, "carol", "laptop", true); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("WorkerKeyTrust(carol/laptop): %v, want ErrNotFound", err)
	}
	if err := s.WorkerKeyDelete(ctx, "alice", "laptop"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WorkerKeyGet(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a deleted key by its hash: %v, want ErrNotFound", err)
	}
	if got, err := s.WorkerKeyGet(ctx, "c"); err != nil || got.Name != "laptop" {
		t.Errorf("bob/laptop after deleting alice/laptop: %+v, %v; want it kept", got, err)
	}
	if err := s.WorkerKeyDelete(ctx, "alice", "laptop"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting alice/laptop twice: %v, want ErrNotFound", err)
	}

	j := NewJob("j", Epoch())
	tasks := NewTasks(j, 5)
	for i, owner := range []string{"alice/a.b_c-d@w1", "alice/a.b_c-d@w2", "alice/a.b_c-dx@w1", "w1"} {
		tk := tasks[i+1]
		tk.State, tk.LeaseOwner, tk.Attempt, tk.LeaseExpiresAt = domain.TaskLeased, owner, 1, Epoch().Add(time.Hour)
	}
	tasks[2].State = domain.TaskFailed // held by the key once, no more
	// Ballots of a vote: the key holds the second, and once held the first.
	tasks[5].Workers = domain.WorkersAny
	voted(tasks[5], Epoch(), "failed alice/a.b_c-d@w1", "leased alice/a.b_c-d@w3", "leased bob/x@w1")
	insertJobs(t, s, j)
	insertTasks(t, s, tasks...)
	got, err := s.TaskListLeasedBy(ctx, "alice/a.b_c-d@")
	if want := []string{tasks[1].ID, tasks[5].ID + ".r2"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("TaskListLeasedBy(alice/a.b_c-d@) = %v, %v; want %v", got, err, want)
	}
}
