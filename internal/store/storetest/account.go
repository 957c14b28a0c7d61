package storetest

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// exerciseAccounts: the migrated database holds the built-in admin; an
// account reads back as written, by name and in the list; a name is
// taken once; an update writes every setting but the name and creation
// time; tokens are found by hash, and revoking an account's tokens but
// one touches no other account's and counts what it revoked.
func exerciseAccounts(t *testing.T, newStore newFunc) {
	s := newStore(t)
	ctx := t.Context()
	admin, err := s.AccountGet(ctx, domain.AdminAccount)
	if err != nil || !admin.Admin || admin.Disabled || admin.Weight != 1 || admin.CreatedAt.IsZero() {
		t.Fatalf("the built-in admin account: %+v, %v; want an enabled admin of weight 1", admin, err)
	}
	alice := &domain.Account{Name: "alice", Weight: 3, MaxRunning: 4, MaxJobs: 5, MaxStorage: 6 << 30,
		CreatedAt: Epoch(), UpdatedAt: Epoch()}
	if err := s.AccountInsert(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if err := s.AccountInsert(ctx, &domain.Account{Name: "alice", Weight: 1, CreatedAt: Epoch(), UpdatedAt: Epoch()}); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("a second account alice: %v, want ErrDuplicate", err)
	}
	got, err := s.AccountGet(ctx, "alice")
	if err != nil || !reflect.DeepEqual(got, alice) {
		t.Errorf("AccountGet(alice) = %+v, %v; want %+v", got, err, alice)
	}
	if _, err := s.AccountGet(ctx, "bob"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AccountGet(bob): %v, want ErrNotFound", err)
	}

	later := Epoch().Add(time.Hour)
	alice.Admin, alice.Disabled, alice.Weight, alice.MaxRunning, alice.MaxJobs, alice.MaxStorage, alice.UpdatedAt = true, true, 7, 0, 0, 0, later
	if err := s.AccountUpdate(ctx, &domain.Account{Name: "alice", Admin: true, Disabled: true, Weight: 7, CreatedAt: later, UpdatedAt: later}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.AccountGet(ctx, "alice"); err != nil || !reflect.DeepEqual(got, alice) {
		t.Errorf("after AccountUpdate: %+v, %v; want %+v (its creation time kept)", got, err, alice)
	}
	if err := s.AccountUpdate(ctx, &domain.Account{Name: "bob", Weight: 1}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AccountUpdate(bob): %v, want ErrNotFound", err)
	}
	list, err := s.AccountList(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "admin" || list[1].Name != "alice" {
		t.Errorf("AccountList: %v, %v; want admin and alice, by name", list, err)
	}

	tokens := []*store.AccountToken{
		{Hash: "h1", Account: "alice", CreatedAt: Epoch()},
		{Hash: "h2", Account: "alice", CreatedAt: Epoch()},
		{Hash: "h3", Account: "alice", CreatedAt: Epoch(), RevokedAt: Epoch()},
		{Hash: "h4", Account: "admin", CreatedAt: Epoch()},
	}
	for _, tk := range tokens {
		if err := s.AccountTokenInsert(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AccountTokenInsert(ctx, &store.AccountToken{Hash: "h1", Account: "admin", CreatedAt: Epoch()}); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("a second token of hash h1: %v, want ErrDuplicate", err)
	}
	if got, err := s.AccountTokenGet(ctx, "h3"); err != nil || !reflect.DeepEqual(got, tokens[2]) {
		t.Errorf("AccountTokenGet(h3) = %+v, %v; want %+v", got, err, tokens[2])
	}
	if _, err := s.AccountTokenGet(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AccountTokenGet(nope): %v, want ErrNotFound", err)
	}
	n, err := s.AccountTokenRevoke(ctx, &store.AccountTokenRevokeParams{Account: "alice", Keep: "h2", Now: later})
	if err != nil || n != 1 {
		t.Errorf("revoke alice's tokens but h2: %d, %v; want 1 (h3 was revoked already)", n, err)
	}
	for hash, revokedAt := range map[string]time.Time{"h1": later, "h2": {}, "h3": Epoch(), "h4": {}} {
		if got, err := s.AccountTokenGet(ctx, hash); err != nil || !got.RevokedAt.Equal(revokedAt) {
			t.Errorf("token %s after the revocation: %+v, %v; want revoked at %v (zero: valid)", hash, got, err, revokedAt)
		}
	}
}

// exerciseAccountUse: an account's unfinished jobs (creating ones
// included), the bytes of its uploads and its leased tasks that workers
// run are counted, and no other account's, one account at a time and
// several in a transaction (TaskCountLeasedLocked); AccountLock reads the account
// as AccountGet does, and a second transaction's AccountLock waits for
// the first to end, so that it sees what the first wrote.
func exerciseAccountUse(t *testing.T, newStore newFunc) {
	s := newStore(t)
	ctx := t.Context()
	for _, name := range []string{"alice", "bob"} {
		if err := s.AccountInsert(ctx, &domain.Account{Name: name, Weight: 1, MaxJobs: 2, CreatedAt: Epoch(), UpdatedAt: Epoch()}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when, owner string, jobs, leased int, bytes int64) {
		t.Helper()
		if n, err := s.JobCountUnfinished(ctx, owner); err != nil || n != jobs {
			t.Errorf("%s: unfinished jobs of %s %d, %v; want %d", when, owner, n, err, jobs)
		}
		if n, err := s.TaskCountLeased(ctx, owner); err != nil || n != leased {
			t.Errorf("%s: leased tasks of %s %d, %v; want %d", when, owner, n, err, leased)
		}
		if n, err := s.UploadSumBytes(ctx, owner); err != nil || n != bytes {
			t.Errorf("%s: upload bytes of %s %d, %v; want %d", when, owner, n, err, bytes)
		}
	}
	check("with nothing", "alice", 0, 0, 0)

	statuses := []domain.JobStatus{domain.JobPending, domain.JobRunning, domain.JobCompleted, domain.JobFailed, domain.JobCancelled}
	for i, st := range statuses {
		j := NewJob(fmt.Sprintf("a%d", i), Epoch())
		j.Owner, j.Status, j.Creating = "alice", st, i == 0
		tasks := NewTasks(j, 3)
		if st == domain.JobRunning {
			tasks[1].State, tasks[1].LeaseOwner, tasks[1].Attempt, tasks[1].LeaseExpiresAt = domain.TaskLeased, "w", 1, Epoch().Add(time.Hour)
			tasks[2].State, tasks[2].LeaseOwner, tasks[2].Attempt, tasks[2].LeaseExpiresAt = domain.TaskLeased, "w", 1, Epoch().Add(time.Hour)
			tasks[0].State, tasks[0].LeaseOwner, tasks[0].Attempt, tasks[0].LeaseExpiresAt = domain.TaskLeased, "c", 1, Epoch().Add(time.Hour) // a stitch: the coordinators' work
		}
		insertJobs(t, s, j)
		insertTasks(t, s, tasks...)
	}
	other := NewJob("b0", Epoch())
	other.Owner = "bob"
	insertJobs(t, s, other)
	otherTasks := NewTasks(other, 1)
	otherTasks[1].State, otherTasks[1].LeaseOwner, otherTasks[1].Attempt, otherTasks[1].LeaseExpiresAt = domain.TaskLeased, "w", 1, Epoch().Add(time.Hour)
	insertTasks(t, s, otherTasks...)
	for i, u := range []struct {
		owner string
		bytes int64
	}{{"alice", 1000}, {"alice", 5 << 30}, {"bob", 7}} {
		up := &domain.Upload{ID: fmt.Sprintf("0:u%d", i), SHA256: "s", Bytes: u.bytes, Rows: 1, BlobKey: fmt.Sprintf("u-%d", i), BlobBytes: u.bytes,
			Owner: u.owner, CreatedAt: Epoch()}
		if err := s.UploadInsert(ctx, up); err != nil {
			t.Fatal(err)
		}
	}
	check("alice's", "alice", 2, 2, 1000+5<<30)
	check("bob's", "bob", 1, 1, 7)
	check("nobody's", "carol", 0, 0, 0)
	err := s.InTx(ctx, func(q store.Querier) error {
		got, err := q.TaskCountLeasedLocked(ctx, []string{"bob", "carol", "alice"})
		if err != nil {
			return err
		}
		if want := map[string]int{"alice": 2, "bob": 1}; !maps.Equal(got, want) {
			t.Errorf("TaskCountLeasedLocked(bob, carol, alice) = %v, want %v", got, want)
		}
		if none, err := q.TaskCountLeasedLocked(ctx, nil); err != nil || len(none) != 0 {
			t.Errorf("TaskCountLeasedLocked(nil) = %v, %v; want nothing", none, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	if a, err := s.AccountLock(ctx, "alice"); err != nil || a.Name != "alice" || a.MaxJobs != 2 {
		t.Errorf("AccountLock(alice) = %+v, %v", a, err)
	}
	if _, err := s.AccountLock(ctx, "carol"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AccountLock(carol): %v, want ErrNotFound", err)
	}

	// A second locker waits for the first transaction, then counts what
	// it wrote.
	locked, second := make(chan struct{}), make(chan struct{})
	seen := make(chan int, 1)
	go func() {
		<-locked
		close(second)
		n := -1
		err := s.InTx(ctx, func(q store.Querier) error {
			if _, err := q.AccountLock(ctx, "bob"); err != nil {
				return err
			}
			var err error
			n, err = q.JobCountUnfinished(ctx, "bob")
			return err
		})
		if err != nil {
			t.Errorf("the second transaction: %v", err)
		}
		seen <- n
	}()
	err = s.InTx(ctx, func(q store.Querier) error {
		if _, err := q.AccountLock(ctx, "bob"); err != nil {
			return err
		}
		close(locked)
		<-second
		time.Sleep(200 * time.Millisecond) // the second transaction reaches its lock meanwhile
		j := NewJob("b1", Epoch())
		j.Owner = "bob"
		return q.JobInsert(ctx, j)
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := <-seen; n != 2 {
		t.Errorf("the second locker counted %d unfinished jobs of bob, want 2: it did not wait for the first transaction", n)
	}
}
