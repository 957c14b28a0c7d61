package engine_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/engine/enginetest"
)

// observed records what an engine tells its Observer.
type observed struct {
	mu     sync.Mutex
	events []string
}

func (o *observed) add(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, fmt.Sprintf(format, args...))
}

func (o *observed) Claimed(k domain.TaskKind, n int, d time.Duration) {
	if d <= 0 {
		o.add("claimed %s %d in %v", k, n, d)
		return
	}
	o.add("claimed %s %d", k, n)
}
func (o *observed) Completed(k domain.TaskKind, n int) { o.add("completed %s %d", k, n) }
func (o *observed) Failed(k domain.TaskKind, final bool) {
	o.add("failed %s final=%v", k, final)
}
func (o *observed) Expired(k domain.TaskKind, final bool) {
	o.add("expired %s final=%v", k, final)
}

// TestObserver checks what the engine reports: claims with their count and
// time, completions without replays, failures without releases, expiries.
func TestObserver(t *testing.T) {
	t.Parallel()
	obs := &observed{}
	c := enginetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	e := newEngine(openStore(t), engine.Config{Now: c.Now, Observer: obs})
	ctx := t.Context()
	if _, _, err := e.CreateJob(ctx, spec(3), ""); err != nil {
		t.Fatal(err)
	}
	claim := func(max int) []*engine.TaskView {
		t.Helper()
		tasks, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w", Max: max})
		if err != nil {
			t.Fatal(err)
		}
		return tasks
	}
	fail := func(tk *engine.TaskView, retryable, release bool) {
		t.Helper()
		if _, err := e.FailTask(ctx, engine.FailTaskParams{TaskID: tk.ID, WorkerID: "w", Attempt: tk.Attempt, Error: "boom",
			Retryable: retryable, Release: release}); err != nil {
			t.Fatal(err)
		}
	}
	two := claim(2)
	result := engine.CompleteTaskParams{TaskID: two[0].ID, WorkerID: "w", Attempt: 1, Output: []byte("id,score\na,1\n")}
	for range 2 { // the replay is not a completion
		if _, err := e.CompleteTask(ctx, result); err != nil {
			t.Fatal(err)
		}
	}
	fail(two[1], true, true) // a release is not a failure
	fail(claim(1)[0], true, false)
	claim(1) // the third chunk, the second one waiting out its backoff
	c.Advance(61 * time.Second)
	if n, err := e.ExpireLeases(ctx); err != nil || n != 1 {
		t.Fatalf("ExpireLeases = %d, %v; want 1", n, err)
	}
	fail(claim(1)[0], false, false)
	claim(1) // nothing left: the job failed

	want := []string{
		"claimed chunk 2", "completed chunk 1", "claimed chunk 1", "failed chunk final=false", "claimed chunk 1",
		"expired chunk final=false", "claimed chunk 1", "failed chunk final=true", "claimed chunk 0",
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if !slices.Equal(obs.events, want) {
		t.Errorf("observed\n%q\nwant\n%q", obs.events, want)
	}
}

// TestObserverTimeout checks that an attempt that reached its deadline is
// reported as a failed attempt, not as an expired lease, and that the
// reaper ends it only once.
func TestObserverTimeout(t *testing.T) {
	t.Parallel()
	obs := &observed{}
	c := enginetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	e := newEngine(openStore(t), engine.Config{Now: c.Now, Observer: obs, Jitter: func() float64 { return 0 }})
	ctx := t.Context()
	sp := spec(1)
	sp.TimeoutSeconds, sp.MaxAttempts = 10, 2
	if _, _, err := e.CreateJob(ctx, sp, ""); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 2; attempt++ {
		tasks, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w"})
		if err != nil || len(tasks) != 1 || tasks[0].Attempt != attempt {
			t.Fatalf("claim of attempt %d: %v, %v", attempt, tasks, err)
		}
		if got, want := tasks[0].AttemptDeadline, c.Now().Add(10*time.Second); !got.Equal(want) || !tasks[0].LeaseExpiresAt.Equal(want) {
			t.Fatalf("attempt %d: deadline %v, lease %v; want both %v", attempt, got, tasks[0].LeaseExpiresAt, want)
		}
		c.Advance(9 * time.Second)
		if n, err := e.ExpireLeases(ctx); err != nil || n != 0 {
			t.Fatalf("ExpireLeases before the deadline = %d, %v; want 0", n, err)
		}
		c.Advance(time.Second)
		for want := 1; want >= 0; want-- { // the second pass finds nothing
			if n, err := e.ExpireLeases(ctx); err != nil || n != want {
				t.Fatalf("ExpireLeases at the deadline = %d, %v; want %d", n, err, want)
			}
		}
		c.Advance(time.Second) // the backoff at jitter 0: 0.5 s
	}
	want := []string{"claimed chunk 1", "failed chunk final=false", "claimed chunk 1", "failed chunk final=true"}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if !slices.Equal(obs.events, want) {
		t.Errorf("observed\n%q\nwant\n%q", obs.events, want)
	}
}
