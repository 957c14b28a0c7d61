package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/engine/enginetest"
	"github.com/scimesh/scimesh/internal/store"
)

// straggling sets up a job of seven chunks: "slow" leases chunk 0 and
// "fast" the six others, which it completes in ten seconds each. It
// returns the engine, its clock, the job and slow's lease of chunk 0.
func straggling(t *testing.T, s store.Store, speculateAfter *float64) (*engine.Engine, *enginetest.Clock, string, *engine.TaskView) {
	t.Helper()
	ctx := t.Context()
	c := enginetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	e := newEngine(s, engine.Config{Now: c.Now})
	sp := spec(7)
	sp.SpeculateAfter = speculateAfter
	j, _, err := e.CreateJob(ctx, sp, "")
	if err != nil {
		t.Fatal(err)
	}
	slow := claimN(t, e, "slow", 1)
	fast := claimN(t, e, "fast", 6)
	if len(slow) != 1 || len(fast) != 6 {
		t.Fatalf("claims: slow %d, fast %d tasks", len(slow), len(fast))
	}
	c.Advance(10 * time.Second)
	for _, tk := range fast {
		completeChunk(t, e, "fast", tk, "f")
	}
	return e, c, j.ID, slow[0]
}

func claimN(t *testing.T, e *engine.Engine, worker string, n int) []*engine.TaskView {
	t.Helper()
	tasks, err := e.ClaimTasks(t.Context(), engine.ClaimTasksParams{WorkerID: worker, Workloads: []string{"w"}, Max: n})
	if err != nil {
		t.Fatal(err)
	}
	return tasks
}

func completeChunk(t *testing.T, e *engine.Engine, worker string, tk *engine.TaskView, id string) error {
	t.Helper()
	_, err := e.CompleteTask(t.Context(), engine.CompleteTaskParams{TaskID: tk.ID, WorkerID: worker, Attempt: tk.Attempt,
		Output: []byte(fmt.Sprintf("id,score\n%s%d,%d\n", id, tk.ChunkIndex, tk.ChunkIndex))})
	return err
}

// TestBackup: a chunk leased for more than speculate_after times the
// median of its job's completed chunks gets a backup attempt, leased to
// another worker that finds nothing else; the first result of the two
// completes it and the other attempt gets ErrLeaseLost.
func TestBackup(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		for _, winner := range []string{"backup", "straggler"} {
			e, c, job, slow := straggling(t, s, nil)
			if got := claimN(t, e, "fast", 1); len(got) != 0 {
				t.Fatalf("a claim at 1x the median: %d tasks, want none", len(got))
			}
			c.Advance(19 * time.Second) // leased 29 s: under 3 times the median of 10 s
			if got := claimN(t, e, "fast", 1); len(got) != 0 {
				t.Fatalf("a claim at 2.9x the median: %d tasks, want none", len(got))
			}
			c.Advance(2 * time.Second) // leased 31 s, over 3 times the median
			if got := claimN(t, e, "slow", 1); len(got) != 0 {
				t.Fatalf("the straggler's own worker claims: %d tasks, want none", len(got))
			}
			backup := claimN(t, e, "fast", 1)
			if len(backup) != 1 || backup[0].ID != slow.ID || backup[0].Attempt != slow.Attempt+1 {
				t.Fatalf("fast's claim at 3.1x the median: %+v; want a backup of %s, attempt %d", backup, slow.ID, slow.Attempt+1)
			}
			if got := claimN(t, e, "other", 1); len(got) != 0 {
				t.Fatalf("a third worker's claim: %d tasks, want none (one backup a chunk)", len(got))
			}
			// Both attempts heartbeat.
			for _, l := range []struct {
				w  string
				tk *engine.TaskView
			}{{"slow", slow}, {"fast", backup[0]}} {
				if _, err := e.RenewLease(ctx, l.tk.ID, l.w, l.tk.Attempt); err != nil {
					t.Fatalf("%s's heartbeat with a backup running: %v", l.w, err)
				}
			}
			win, winTask, lose, loseTask := "fast", backup[0], "slow", slow
			if winner == "straggler" {
				win, winTask, lose, loseTask = lose, loseTask, win, winTask
			}
			if err := completeChunk(t, e, win, winTask, win); err != nil {
				t.Fatalf("%s's result: %v", winner, err)
			}
			if err := completeChunk(t, e, lose, loseTask, lose); !errors.Is(err, domain.ErrLeaseLost) {
				t.Errorf("the other attempt's result after the %s's: %v, want ErrLeaseLost", winner, err)
			}
			if _, err := e.RenewLease(ctx, loseTask.ID, lose, loseTask.Attempt); !errors.Is(err, domain.ErrLeaseLost) {
				t.Errorf("the other attempt's heartbeat after the %s's result: %v, want ErrLeaseLost", winner, err)
			}
			if _, err := e.StitchReadyJobs(ctx); err != nil {
				t.Fatal(err)
			}
			if got := readResult(t, e, job); string(got) != "id,score\nf6,6\n" {
				t.Errorf("final CSV after the %s won: %q", winner, got)
			}
			tk, err := e.GetTask(ctx, slow.ID)
			if err != nil || tk.State != domain.TaskCompleted || string(tk.Result) != fmt.Sprintf("id,score\n%s0,0\n", win) {
				t.Errorf("chunk 0 after the %s won: %+v, %v", winner, tk, err)
			}
		}
	})
}

// TestBackupOneEnds: when one of the two attempts fails or its lease
// runs out, the other goes on and its result completes the chunk.
func TestBackupOneEnds(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		ends := map[string]func(e *engine.Engine, c *enginetest.Clock, worker string, tk *engine.TaskView) error{
			"fails": func(e *engine.Engine, c *enginetest.Clock, worker string, tk *engine.TaskView) error {
				_, err := e.FailTask(ctx, engine.FailTaskParams{TaskID: tk.ID, WorkerID: worker, Attempt: tk.Attempt, Error: "exit 1", Retryable: true})
				return err
			},
			"is killed": func(e *engine.Engine, c *enginetest.Clock, worker string, tk *engine.TaskView) error {
				// Only the other attempt heartbeats until this one's lease ran out.
				other := map[string]string{"slow": "fast", "fast": "slow"}[worker]
				for range 3 {
					c.Advance(25 * time.Second)
					if _, err := e.RenewLease(ctx, tk.ID, other, map[string]int{"slow": 1, "fast": 2}[other]); err != nil {
						return err
					}
				}
				_, err := e.ExpireLeases(ctx)
				return err
			},
		}
		for what, end := range ends {
			for _, ended := range []string{"slow", "fast"} {
				e, c, _, slow := straggling(t, s, nil)
				c.Advance(21 * time.Second)
				backup := claimN(t, e, "fast", 1)
				if len(backup) != 1 {
					t.Fatalf("no backup")
				}
				tasks := map[string]*engine.TaskView{"slow": slow, "fast": backup[0]}
				if err := end(e, c, ended, tasks[ended]); err != nil {
					t.Fatalf("%s %s: %v", ended, what, err)
				}
				tk, err := e.GetTask(ctx, slow.ID)
				if err != nil || tk.State != domain.TaskLeased {
					t.Fatalf("after %s's attempt %s: chunk %s (%v), want leased", ended, what, tk.State, err)
				}
				other := map[string]string{"slow": "fast", "fast": "slow"}[ended]
				if err := completeChunk(t, e, other, tasks[other], other); err != nil {
					t.Errorf("after %s's attempt %s, %s's result: %v", ended, what, other, err)
				}
				if tk, err = e.GetTask(ctx, slow.ID); err != nil || tk.State != domain.TaskCompleted {
					t.Errorf("after %s's attempt %s and the other's result: %s (%v), want completed", ended, what, tk.State, err)
				}
			}
		}
	})
}

// TestBackupOff: speculate_after 0 never backs up; a job with pending
// chunks, or too few completed, is not backed up either.
func TestBackupOff(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		off := 0.0
		e, c, job, _ := straggling(t, s, &off)
		c.Advance(40 * time.Second) // leased 50 s: 5 times the median, within its lease
		if got := claimN(t, e, "fast", 1); len(got) != 0 {
			t.Errorf("speculate_after 0: a claim got %d tasks, want none", len(got))
		}
		// Four chunks completed of five: too few for a median.
		ctx := context.Background()
		if _, err := e.CancelJob(ctx, job); err != nil {
			t.Fatal(err)
		}
		five := spec(5)
		five.SpeculateAfter = nil
		if _, _, err := e.CreateJob(ctx, five, ""); err != nil {
			t.Fatal(err)
		}
		if got := claimN(t, e, "slow", 1); len(got) != 1 {
			t.Fatalf("slow's claim: %d tasks", len(got))
		}
		four := claimN(t, e, "fast", 4)
		c.Advance(10 * time.Second)
		for _, tk := range four {
			completeChunk(t, e, "fast", tk, "f")
		}
		c.Advance(40 * time.Second)
		if got := claimN(t, e, "fast", 1); len(got) != 0 {
			t.Errorf("four chunks completed: a claim got %d tasks, want none: %+v", len(got), got[0].Task)
		}
	})
}

// TestBackupEach: each straggling chunk gets a backup, one after the
// other, whichever was backed up first; and a chunk whose backup failed
// gets another, numbered after it.
func TestBackupEach(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		c := enginetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		e := newEngine(s, engine.Config{Now: c.Now})
		if _, _, err := e.CreateJob(ctx, spec(8), ""); err != nil {
			t.Fatal(err)
		}
		slow1 := claimN(t, e, "slow1", 1)
		c.Advance(time.Second)
		slow2 := claimN(t, e, "slow2", 1)
		fast := claimN(t, e, "fast", 6)
		c.Advance(10 * time.Second)
		for _, tk := range fast {
			completeChunk(t, e, "fast", tk, "f")
		}
		c.Advance(21 * time.Second)
		first := claimN(t, e, "fast", 1)
		if len(first) != 1 || first[0].ID != slow1[0].ID {
			t.Fatalf("the first backup: %+v, want one of %s", first, slow1[0].ID)
		}
		if _, err := e.RenewLease(ctx, slow1[0].ID, "slow1", slow1[0].Attempt); err != nil {
			t.Fatal(err)
		}
		second := claimN(t, e, "fast2", 1)
		if len(second) != 1 || second[0].ID != slow2[0].ID {
			t.Fatalf("the second backup: %+v, want one of %s", second, slow2[0].ID)
		}
		// The first backup fails; its straggler goes on and gets another.
		if _, err := e.FailTask(ctx, engine.FailTaskParams{TaskID: first[0].ID, WorkerID: "fast", Attempt: first[0].Attempt,
			Error: "exit 1", Retryable: true}); err != nil {
			t.Fatal(err)
		}
		again := claimN(t, e, "fast3", 1)
		if len(again) != 1 || again[0].ID != slow1[0].ID || again[0].Attempt != 3 {
			t.Fatalf("after the backup failed: %+v, want a backup of %s, attempt 3", again, slow1[0].ID)
		}
		if _, err := e.RenewLease(ctx, first[0].ID, "fast", first[0].Attempt); !errors.Is(err, domain.ErrLeaseLost) {
			t.Errorf("the failed backup's heartbeat: %v, want ErrLeaseLost", err)
		}
	})
}

// TestBackupCharged: both attempts of a backed-up chunk are charged,
// however the chunk ends: the straggler's 36 s and the backup's 5 s,
// beside the six other chunks' 60 s.
func TestBackupCharged(t *testing.T) {
	t.Parallel()
	ends := map[string]func(e *engine.Engine, job string, slow, backup *engine.TaskView) error{
		"the backup's result": func(e *engine.Engine, _ string, _, backup *engine.TaskView) error {
			return completeChunk(t, e, "fast", backup, "f")
		},
		"a cancel of the job": func(e *engine.Engine, job string, _, _ *engine.TaskView) error {
			_, err := e.CancelJob(t.Context(), job)
			return err
		},
		"the straggler's failure for good": func(e *engine.Engine, _ string, slow, _ *engine.TaskView) error {
			_, err := e.FailTask(t.Context(), engine.FailTaskParams{TaskID: slow.ID, WorkerID: "slow", Attempt: slow.Attempt, Error: "bad line 3"})
			return err
		},
	}
	onBothStores(t, func(t *testing.T, s store.Store) {
		var before engine.UsageEntry
		for what, end := range ends {
			e, c, job, slow := straggling(t, s, nil)
			c.Advance(21 * time.Second)
			backup := claimN(t, e, "fast", 1)
			if len(backup) != 1 || backup[0].ID != slow.ID {
				t.Fatalf("%s: no backup of the straggler: %+v", what, backup)
			}
			c.Advance(5 * time.Second)
			if err := end(e, job, slow, backup[0]); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			got, err := e.ListUsage(t.Context(), engine.ListUsageParams{})
			if err != nil || len(got) != 1 {
				t.Fatalf("%s: usage %+v, %v", what, got, err)
			}
			// The cases share a database: each adds its own.
			if tasks, secs := got[0].Tasks-before.Tasks, got[0].WorkerSeconds-before.WorkerSeconds; tasks != 8 || secs != 101 {
				t.Errorf("%s: charged %d attempts and %v s, want 8 and 101 s", what, tasks, secs)
			}
			before = got[0]
		}
	})
}
