package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/engine/enginetest"
	"github.com/scimesh/scimesh/internal/store"
)

// cancelAfterClaim cancels its caller's context the moment a claim
// statement returned, as a worker that shuts down mid-claim does.
type cancelAfterClaim struct {
	store.Store
	cancel atomic.Pointer[context.CancelFunc]
}

func (s *cancelAfterClaim) TaskClaim(ctx context.Context, p *store.TaskClaimParams) ([]*domain.Task, error) {
	tasks, err := s.Store.TaskClaim(ctx, p)
	if c := s.cancel.Load(); c != nil {
		(*c)()
	}
	return tasks, err
}

// TestClaimOfAGoneCaller checks that a claim whose caller went away while
// it ran gives its task back at once, the attempt not held against it,
// rather than leave it leased to nobody until the lease expires; and that
// a caller gone before its claim claims nothing.
func TestClaimOfAGoneCaller(t *testing.T) {
	t.Parallel()
	s := &cancelAfterClaim{Store: openStore(t)}
	c := enginetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	e := newEngine(s, engine.Config{Now: c.Now, Jitter: func() float64 { return 0 }})
	sp := spec(1)
	sp.MaxAttempts = 1
	v, _, err := e.CreateJob(t.Context(), sp, "")
	if err != nil {
		t.Fatal(err)
	}
	b := &leaseBundle{e: e, s: s, clock: c}
	if _, err := e.GetTask(t.Context(), v.ID+"-0"); err != nil { // the job's settings cached, as after any claim
		t.Fatal(err)
	}

	gone, cancel := context.WithCancel(t.Context())
	cancel()
	if tasks, err := e.ClaimTasks(gone, engine.ClaimTasksParams{WorkerID: "w0"}); !errors.Is(err, context.Canceled) || len(tasks) != 0 {
		t.Fatalf("the claim of a caller gone before it = %+v, %v; want no task, context.Canceled", tasks, err)
	}
	if got, err := s.TaskGet(t.Context(), v.ID+"-0"); err != nil || got.Attempt != 0 {
		t.Fatalf("the task after a claim by a caller gone before it: %+v, %v; want never claimed", got, err)
	}

	leaving, cancel := context.WithCancel(t.Context())
	s.cancel.Store(&cancel)
	if tasks, err := e.ClaimTasks(leaving, engine.ClaimTasksParams{WorkerID: "w1"}); !errors.Is(err, context.Canceled) || len(tasks) != 0 {
		t.Fatalf("the claim of a caller that left during it = %+v, %v; want no task, context.Canceled", tasks, err)
	}
	s.cancel.Store(nil)
	b.task = b.claim(t, "w2", 2) // at once, and the one attempt allowed is not spent
	if got := b.stored(t); got.MaxAttempts != 2 || got.LeaseOwner != "w2" {
		t.Fatalf("the task after the unanswered claim and a new one: %+v; want leased to w2 with max_attempts 2", got)
	}
	b.checkRefused(t, "the unanswered claim's attempt", "w1", 1, domain.ErrLeaseLost)
}

// argsFailStore fails reading a task's arguments while fail is set, as a
// database that goes away between a tree task's claim and that read does.
type argsFailStore struct {
	store.Store
	fail atomic.Bool
}

func (s *argsFailStore) TaskArgList(ctx context.Context, taskID string) ([]domain.TaskArg, error) {
	if s.fail.Load() {
		return nil, errors.New("the database went away")
	}
	return s.Store.TaskArgList(ctx, taskID)
}

// TestPollTreeUnanswered checks that a tree task whose claim cannot be
// answered (its arguments could not be read) is given back at once, its
// one attempt not spent, rather than left leased to a caller that never
// got it.
func TestPollTreeUnanswered(t *testing.T) {
	t.Parallel()
	s := &argsFailStore{Store: openStore(t)}
	c := enginetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	e := newEngine(s, engine.Config{Shard: "s0", Now: c.Now})
	ids, _, err := e.SubmitTree(t.Context(), &domain.TreeSpec{Tasks: []domain.TreeTaskSpec{
		{ID: "s0:a", Workload: "num", Args: []domain.TreeArg{{Value: json.RawMessage("1")}}, MaxAttempts: 1},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.fail.Store(true)
	if task, err := e.PollTree(t.Context(), "w1", []string{"num"}, 0); err == nil || task != nil {
		t.Fatalf("PollTree while the arguments cannot be read = %+v, %v; want an error", task, err)
	}
	s.fail.Store(false)
	task, err := e.PollTree(t.Context(), "w2", []string{"num"}, 0)
	if err != nil || task == nil || task.ID != ids["s0:a"] || task.Attempt != 2 || task.MaxAttempts != 2 || string(task.Args[0]) != "1" {
		t.Fatalf("PollTree after = %+v, %v; want the task at once, attempt 2 of 2", task, err)
	}
}
