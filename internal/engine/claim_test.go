package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
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

func TestClaimsTogetherAnswerAsAlone(t *testing.T) {
	t.Parallel()
	workers := []string{"a", "b", "a", "c"} // three tasks for four callers
	bothStores(t, func(t *testing.T, open func() store.Store) {
		ctx := t.Context()
		assign := func(tasks []*domain.Task) []string {
			var out []string
			for i, tk := range tasks {
				if tk == nil {
					out = append(out, workers[i]+": none")
					continue
				}
				out = append(out, fmt.Sprintf("%s: chunk %d leased to %s, attempt %d", workers[i], tk.ChunkIndex, tk.LeaseOwner, tk.Attempt))
			}
			return out
		}
		var alone []*domain.Task
		e := newEngine(open(), engine.Config{})
		if _, _, err := e.CreateJob(ctx, spec(3), ""); err != nil {
			t.Fatal(err)
		}
		for _, w := range workers {
			got, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: w})
			if err != nil {
				t.Fatal(err)
			}
			var tk *domain.Task
			if len(got) == 1 {
				tk = got[0].Task
			}
			alone = append(alone, tk)
		}
		e = newEngine(open(), engine.Config{})
		j, _, err := e.CreateJob(ctx, spec(3), "")
		if err != nil {
			t.Fatal(err)
		}
		together, errs := e.ClaimTogether(ctx, workers)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("claim %d together: %v", i, err)
			}
		}
		if a, b := assign(alone), assign(together); !slices.Equal(a, b) {
			t.Errorf("claims:\nalone    %q\ntogether %q", a, b)
		}
		if v, err := e.GetJob(ctx, j.ID); err != nil || v.Status != domain.JobRunning {
			t.Errorf("job after the claims together: %v, %v; want running", v, err)
		}
	})
}

// slowClaims is a store whose claims take a while, so that concurrent
// claims queue behind the ones in flight.
type slowClaims struct {
	store.Store
	calls, tasks atomic.Int64
}

func (s *slowClaims) TaskClaim(ctx context.Context, p *store.TaskClaimParams) ([]*domain.Task, error) {
	time.Sleep(5 * time.Millisecond)
	s.calls.Add(1)
	got, err := s.Store.TaskClaim(ctx, p)
	s.tasks.Add(int64(len(got)))
	return got, err
}

// TestConcurrentClaimsShareStatements has 32 workers claim (one task, or
// two or three at once) and complete 400 tasks: every task is completed
// exactly once, by the worker it was leased to, no claim gets more than it
// asked for, and the claims took fewer statements than calls.
func TestConcurrentClaimsShareStatements(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, open func() store.Store) {
		ctx := t.Context()
		s := &slowClaims{Store: open()}
		e := newEngine(s, engine.Config{})
		sp := spec(400)
		off := 0.0
		sp.SpeculateAfter = &off // a backup hands a chunk out twice, on purpose: not here
		j, _, err := e.CreateJob(ctx, sp, "")
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		done := map[string]string{}
		var claimCalls atomic.Int64
		var wg sync.WaitGroup
		for w := range 32 {
			worker := fmt.Sprintf("w%d", w)
			max := 1 + w%3
			wg.Go(func() {
				for {
					claimCalls.Add(1)
					tasks, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: worker, Max: max})
					if err != nil {
						t.Error(err)
						return
					}
					if len(tasks) == 0 {
						return
					}
					if len(tasks) > max {
						t.Errorf("%s asked for %d tasks and got %d", worker, max, len(tasks))
					}
					for _, tk := range tasks {
						if tk.LeaseOwner != worker {
							t.Errorf("%s got task %s leased to %s", worker, tk.ID, tk.LeaseOwner)
						}
						if _, err := e.CompleteTask(ctx, engine.CompleteTaskParams{TaskID: tk.ID, WorkerID: worker, Attempt: tk.Attempt, Output: []byte("id,score\nx,1\n")}); err != nil {
							t.Errorf("%s: result of %s: %v", worker, tk.ID, err)
						}
						mu.Lock()
						if prev, ok := done[tk.ID]; ok {
							t.Errorf("task %s handed to %s and %s", tk.ID, prev, worker)
						}
						done[tk.ID] = worker
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		if len(done) != 400 {
			t.Fatalf("%d tasks done, want 400", len(done))
		}
		calls, tasks := s.calls.Load(), s.tasks.Load()
		t.Logf("%d tasks in %d claim statements for %d claims", tasks, calls, claimCalls.Load())
		if tasks != 400 || calls >= claimCalls.Load() {
			t.Errorf("%d claim statements leased %d tasks to %d claims; want 400 tasks in fewer statements than claims", calls, tasks, claimCalls.Load())
		}
		v, err := e.GetJob(ctx, j.ID)
		if err != nil || v.Tasks.Completed != 400 {
			t.Errorf("job: %+v, %v; want 400 completed", v, err)
		}
	})
}
