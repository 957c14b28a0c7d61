package engine_test

import (
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/engine/enginetest"
)

// TestWorkersSeenAndPruned: a worker's claims and heartbeats are recorded
// for the dashboard, and a worker silent for a week is forgotten.
func TestWorkersSeenAndPruned(t *testing.T) {
	t.Parallel()
	c := enginetest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	e := newEngine(openStore(t), engine.Config{Now: c.Now})
	ctx := t.Context()
	if _, _, err := e.CreateJob(ctx, spec(1), ""); err != nil {
		t.Fatal(err)
	}
	tasks, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w1"})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim: %v %v", tasks, err)
	}
	c.Advance(10 * time.Second)
	if _, err := e.RenewLease(ctx, tasks[0].ID, "w1", 1); err != nil {
		t.Fatal(err)
	}
	ws, err := e.ListWorkers(ctx, time.Hour, 10)
	if err != nil || len(ws) != 1 || ws[0].ID != "w1" || len(ws[0].Tasks) != 1 || ws[0].Tasks[0].ID != tasks[0].ID ||
		!ws[0].LastHeartbeat.Equal(c.Now()) {
		t.Fatalf("workers after a claim and a heartbeat: %+v, %v; want w1 holding its task, heartbeat now", ws, err)
	}
	if n, err := e.PruneWorkers(ctx); n != 0 || err != nil {
		t.Fatalf("pruned %d workers seen seconds ago (%v)", n, err)
	}
	c.Advance(8 * 24 * time.Hour)
	if n, err := e.PruneWorkers(ctx); n != 1 || err != nil {
		t.Fatalf("pruned %d workers silent for 8 days (%v), want 1", n, err)
	}
	if ws, _ := e.ListWorkers(ctx, 365*24*time.Hour, 10); len(ws) != 0 {
		t.Fatalf("a pruned worker is still listed: %+v", ws)
	}
}
