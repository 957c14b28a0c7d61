package engine_test

import (
	"errors"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/engine/enginetest"
	"github.com/scimesh/scimesh/internal/store"
)

// TestBallotRoutes runs a vote's replicas, which are ballots in their
// chunk's row, through every route a worker's task takes: a heartbeat
// moves the replica's lease and its chunk's expiry with it; its log is
// its own; a release gives it back pending; a lease that runs out is
// ended by the reaper, which finds it through its chunk; and cancelling
// the job stops the replica still running, whose next heartbeat is
// refused. The other chunk of the job, never voted on, is untouched.
func TestBallotRoutes(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		c := enginetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		e := newEngine(s, engine.Config{Now: c.Now})
		j := anyJobOf(t, e, 1, 2, 3)
		chunk := j.ID + "-0"
		ada, bob, cy := key(ctx, "ada"), key(ctx, "bob"), key(ctx, "cy")
		r1, r2 := chunk+".r1", chunk+".r2"
		if got := claimIDs(t, ada, e, "a1", 1); len(got) != 1 || got[0] != r1 {
			t.Fatalf("ada claims %v; want %s", got, r1)
		}
		expiry := func() time.Time {
			t.Helper()
			got, err := s.TaskGet(ctx, chunk)
			if err != nil {
				t.Fatal(err)
			}
			return got.LeaseExpiresAt
		}
		if want := c.Now().Add(60 * time.Second); !expiry().Equal(want) {
			t.Errorf("the chunk's lease expires at %v; want its one ballot's, %v", expiry(), want)
		}

		// A heartbeat moves the ballot's lease on, and the chunk's.
		c.Advance(10 * time.Second)
		until, err := e.RenewLease(ada, r1, "a1", 1)
		if err != nil || !until.Equal(c.Now().Add(60*time.Second)) {
			t.Fatalf("heartbeat of %s: %v, %v; want the lease to %v", r1, until, err, c.Now().Add(60*time.Second))
		}
		if !expiry().Equal(until) {
			t.Errorf("the chunk's lease expires at %v after its ballot's heartbeat; want %v", expiry(), until)
		}

		// Its log is its own.
		if err := e.AppendLogs(ada, engine.AppendLogsParams{TaskID: r1, WorkerID: "a1", Attempt: 1, Lines: []string{"ballot one"}}); err != nil {
			t.Fatal(err)
		}
		page, err := e.ListLogs(as(ctx, "carol"), r1, 0, 10)
		if err != nil || len(page.Lines) != 1 || page.Lines[0].Line != "ballot one" {
			t.Errorf("the log of %s: %+v, %v; want its one line", r1, page, err)
		}
		if page, err := e.ListLogs(as(ctx, "carol"), chunk, 0, 10); err != nil || len(page.Lines) != 0 {
			t.Errorf("the log of the chunk: %+v, %v; want none of its ballots' lines", page, err)
		}

		// A release gives it back, pending; bob takes the other ballot.
		if _, err := e.FailTask(ada, engine.FailTaskParams{TaskID: r1, WorkerID: "a1", Attempt: 1, Error: "shutting down", Release: true}); err != nil {
			t.Fatal(err)
		}
		if v, err := e.GetTask(ctx, r1); err != nil || v.State != domain.TaskPending {
			t.Fatalf("%s after its release: %+v, %v; want pending", r1, v, err)
		}
		if got := claimIDs(t, bob, e, "b1", 1); len(got) != 1 || got[0] != r1 {
			t.Fatalf("bob claims %v; want %s, pending first", got, r1)
		}
		if got := claimIDs(t, cy, e, "c1", 1); len(got) != 1 || got[0] != r2 {
			t.Fatalf("cy claims %v; want %s", got, r2)
		}

		// Bob's lease runs out: the reaper ends it, and the tally offers a
		// new ballot.
		c.Advance(30 * time.Second)
		if _, err := e.RenewLease(cy, r2, "c1", 1); err != nil {
			t.Fatal(err)
		}
		c.Advance(31 * time.Second)
		if n, err := e.ExpireLeases(ctx); err != nil || n != 1 {
			t.Fatalf("ExpireLeases: %d, %v; want bob's ballot alone ended", n, err)
		}
		if v, err := e.GetTask(ctx, r1); err != nil || v.State != domain.TaskFailed {
			t.Errorf("%s after its lease ran out: %+v, %v; want failed", r1, v, err)
		}
		if got := claimIDs(t, ada, e, "a2", 1); len(got) != 1 || got[0] != chunk+".r3" {
			t.Fatalf("ada claims %v after bob's ballot expired; want the new ballot %s.r3", got, chunk)
		}

		// Cancelling the job stops the ballots still running.
		if _, err := e.CancelJob(as(ctx, "carol"), j.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.RenewLease(cy, r2, "c1", 1); !errors.Is(err, domain.ErrCancelled) && !errors.Is(err, domain.ErrLeaseLost) {
			t.Errorf("heartbeat of %s after its job was cancelled: %v; want it refused", r2, err)
		}
		if v, err := e.GetTask(ctx, r2); err != nil || v.State != domain.TaskCancelled {
			t.Errorf("%s after its job was cancelled: %+v, %v; want cancelled", r2, v, err)
		}
	})
}
