package sqlite

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/migrate"
	"github.com/scimesh/scimesh/internal/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newStore opens a fresh, migrated store on a file of its own under t's
// temporary directory.
func newStore(t *testing.T) store.Store {
	t.Helper()
	return openStore(t, filepath.Join(t.TempDir(), "scimesh.db"))
}

func openStore(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, newStore)
}

func TestOpenCreatesDirectoryAndKeepsData(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a", "b", "scimesh.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	j := storetest.NewJob("j1", storetest.Epoch())
	if err := s.JobInsert(t.Context(), j); err != nil {
		t.Fatalf("JobInsert: %v", err)
	}
	if err := s.TaskInsert(t.Context(), storetest.NewTasks(j, 3)); err != nil {
		t.Fatalf("TaskInsert: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = openStore(t, path)
	got, err := s.JobGet(t.Context(), "j1")
	if err != nil {
		t.Fatalf("JobGet after reopening: %v", err)
	}
	if d := storetest.JobDiff(got, j); d != "" {
		t.Errorf("job after reopening differs: %s", d)
	}
	all, err := s.JobTaskCounts(t.Context(), []string{"j1"})
	counts := all["j1"]
	if err != nil || counts.Pending != 3 {
		t.Errorf("JobTaskCounts after reopening = %+v, %v; want 3 pending", counts, err)
	}
	var mode string
	if err := s.writer.QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
}

func TestMigrateDownUp(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "scimesh.db")
	openStore(t, path) // applies every migration
	s, err := OpenNoMigrate(ctx, path)
	if err != nil {
		t.Fatalf("OpenNoMigrate: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ms, err := Migrations()
	if err != nil || len(ms) == 0 {
		t.Fatalf("Migrations() = %d migrations, %v", len(ms), err)
	}
	db := s.MigrateDB()
	if n, err := migrate.Pending(ctx, db, ms); err != nil || n != 0 {
		t.Fatalf("Pending after Open = %d, %v; want 0", n, err)
	}
	for i := len(ms) - 1; i >= 0; i-- {
		v, err := migrate.Down(ctx, db, ms)
		if err != nil || v != ms[i].Version {
			t.Fatalf("Down = %d, %v; want %d", v, err, ms[i].Version)
		}
	}
	if v, err := migrate.Down(ctx, db, ms); err != nil || v != 0 {
		t.Fatalf("Down with nothing applied = %d, %v; want 0", v, err)
	}
	if _, err := s.JobGet(ctx, "j1"); err == nil || errors.Is(err, store.ErrNotFound) {
		t.Errorf("JobGet with no schema = %v, want an error other than ErrNotFound", err)
	}
	st, err := migrate.Status(ctx, db, ms)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	for _, m := range st {
		if m.Applied {
			t.Errorf("migration %d applied after Down", m.Version)
		}
	}
	done, err := migrate.Up(ctx, db, ms)
	if err != nil || len(done) != len(ms) {
		t.Fatalf("Up = %v, %v; want all %d", done, err, len(ms))
	}
	// The store works on the schema it got back, even inside a transaction
	// (whose statements OpenNoMigrate never prepared).
	err = s.InTx(ctx, func(q store.Querier) error {
		j := storetest.NewJob("j1", storetest.Epoch())
		if err := q.JobInsert(ctx, j); err != nil {
			return err
		}
		return q.TaskInsert(ctx, storetest.NewTasks(j, 200))
	})
	if err != nil {
		t.Fatalf("InTx after Up: %v", err)
	}
	if _, err := s.JobGet(ctx, "j1"); err != nil {
		t.Errorf("JobGet after Up: %v", err)
	}
}

// TestClaimUsesPartialIndex checks that the claim walks tasks_claim in order:
// no full scan, no sort in a temporary b-tree, whatever the backlog.
func TestClaimUsesPartialIndex(t *testing.T) {
	t.Parallel()
	s := newStore(t).(*Store)
	ctx := t.Context()
	for i := range 20 {
		j := storetest.NewJob(fmt.Sprintf("j%d", i), storetest.Epoch())
		if err := s.TaskInsert(ctx, storetest.NewTasks(j, 50)); err != nil {
			t.Fatalf("TaskInsert: %v", err)
		}
	}
	for name, c := range map[string]struct {
		query string
		args  []any
		index string
	}{
		"claim of any workload":   {taskClaimCandidatesSQL, []any{"chunk", 10}, "tasks_claim"},
		"claim of a workload":     {taskClaimWorkloadCandidatesSQL, []any{"chunk", 10, "tanimoto"}, "tasks_claim_workload"},
		"claim of the candidates": {taskClaimRowsSQL, []any{"w", 1, "[1,2]"}, "sqlite_autoindex_tasks_1"},
		"backoff passed":          {taskRunnableSQL, []any{1, 10}, "tasks_backoff"},
		"stitch claim":            {taskClaimStitchSQL, []any{"w", 1, 10}, "tasks_claim_stitch"},
	} {
		plan := queryPlan(t, s, c.query, c.args...) + "\n"
		uses := false
		for _, end := range []string{" (", "\n"} {
			uses = uses || strings.Contains(plan, "USING COVERING INDEX "+c.index+end) || strings.Contains(plan, "USING INDEX "+c.index+end)
		}
		if !uses && !strings.Contains(plan, "USING INTEGER PRIMARY KEY") {
			t.Errorf("%s plan does not use %s:\n%s", name, c.index, plan)
		}
		if strings.Contains(plan, "TEMP B-TREE FOR ORDER BY") || strings.Contains(plan, "SCAN tasks\n") {
			t.Errorf("%s plan sorts or scans the table:\n%s", name, plan)
		}
	}
	// The other hot queries use their indexes too.
	for _, c := range []struct {
		query string
		args  []any
		index string
	}{
		{taskListExpiredSQL, []any{1, 10}, "tasks_lease_expiry"},
		{taskResultListSQL, []any{"j1", -1, 16}, "tasks_job_kind_state"},
		{jobTaskCountsSQL, []any{"j1"}, "tasks_job_kind_state"},
		{taskListSQLs[0], []any{"j1", "chunk", -1, 10}, "tasks_job_kind_index"},
		{taskListSQLs[1], []any{"j1", "chunk", -1, "pending", 10}, "tasks_job_kind_state"},
		{taskCancelJobSQL, []any{1, "j1", ""}, "tasks_job_kind"},
		{taskUpstreamDoneSQL, []any{1, 1, "t"}, "sqlite_autoindex_tasks_1"},
		{taskGetSQL, []any{"t"}, "sqlite_autoindex_tasks_1"},
		{taskUpdateSQL, make([]any, 14), "sqlite_autoindex_tasks_1"},
		{taskRetryJobSQL, []any{1, 1, "j1"}, "tasks_job_kind"},
		{taskLogLastSQL, []any{"t", 1}, "task_logs_seq"},
		{jobListSQLs[0][0], []any{10}, "jobs_created"},
		{jobListSQLs[0][1], []any{1, "j", 10}, "jobs_created"},
		{jobListSQLs[1][0], []any{"pending", 10}, "jobs_status_created"},
		{jobListSQLs[1][1], []any{"pending", 1, "j", 10}, "jobs_status_created"},
		{jobByKeySQL, []any{"k"}, "jobs_idempotency_key"},
		{jobMarkRunningSQL, []any{1, `["j1"]`}, "sqlite_autoindex_jobs_1"},
		{jobUpdateSQL, make([]any, 8), "sqlite_autoindex_jobs_1"},
	} {
		plan := queryPlan(t, s, c.query, c.args...)
		if !strings.Contains(plan, c.index) || strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("plan of %q does not use %s without sorting:\n%s", c.query, c.index, plan)
		}
	}
}

func queryPlan(t *testing.T, s *Store, query string, args ...any) string {
	t.Helper()
	rows, err := s.writer.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("EXPLAIN QUERY PLAN %s: %v", query, err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatalf("read plan: %v", err)
		}
		b.WriteString(detail + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read plan: %v", err)
	}
	return b.String()
}

// TestBusyIsUnavailable checks that a write lock held by another process
// (here, another connection) for longer than busy_timeout is ErrUnavailable.
func TestBusyIsUnavailable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "scimesh.db")
	s := openStore(t, path)
	other := openStore(t, path)
	ctx := t.Context()
	locked, release := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- other.InTx(ctx, func(q store.Querier) error {
			close(locked)
			<-release
			return nil
		})
	}()
	<-locked
	if _, err := s.writer.ExecContext(ctx, "PRAGMA busy_timeout = 50"); err != nil {
		t.Fatalf("set busy_timeout: %v", err)
	}
	err := s.JobInsert(ctx, storetest.NewJob("j1", storetest.Epoch()))
	close(release)
	if err := <-errc; err != nil {
		t.Errorf("InTx holding the lock: %v", err)
	}
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("JobInsert while another connection holds the write lock = %v, want ErrUnavailable", err)
	}
}

// TestLargeInsert inserts a large job in one transaction: the batched insert
// keeps it to seconds, not minutes.
func TestLargeInsert(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("slow under -short and -race")
	}
	t.Parallel()
	s := newStore(t)
	j := storetest.NewJob("big", storetest.Epoch())
	const n = 100_000
	tasks := storetest.NewTasks(j, n)
	start := time.Now()
	err := s.InTx(t.Context(), func(q store.Querier) error {
		if err := q.JobInsert(t.Context(), j); err != nil {
			return err
		}
		return q.TaskInsert(t.Context(), tasks)
	})
	if err != nil {
		t.Fatalf("insert %d tasks: %v", n, err)
	}
	t.Logf("inserted %d tasks in %s", n+1, time.Since(start))
	all, err := s.JobTaskCounts(t.Context(), []string{"big"})
	counts := all["big"]
	if err != nil || counts.Pending != n {
		t.Errorf("JobTaskCounts = %+v, %v; want %d pending", counts, err, n)
	}
	got, err := s.TaskClaim(t.Context(), &store.TaskClaimParams{Owner: "w", Kinds: []domain.TaskKind{domain.KindChunk}, Max: 3, Now: storetest.Epoch()})
	if err != nil || len(got) != 3 {
		t.Fatalf("TaskClaim = %d tasks, %v", len(got), err)
	}
}

// TestWriterTurnsInOrder pins that uses of the writer connection are
// served in the order they asked for it: behind eight goroutines writing
// back to back, a write waits for at most the eight transactions queued or
// running ahead of it and the one in flight. (database/sql alone hands the
// one connection to a waiter picked at random, and such a write waited
// there for dozens.)
func TestWriterTurnsInOrder(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "scimesh.db"))
	ctx := t.Context()
	if _, err := s.writer.ExecContext(ctx, `CREATE TABLE turns (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	const loopers = 8
	var commits atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range loopers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := s.InTx(ctx, func(q store.Querier) error {
					commits.Add(1)
					_, err := q.(*querier).tx.ExecContext(ctx, `INSERT INTO turns VALUES (1)`)
					time.Sleep(200 * time.Microsecond) // hold the turn so that a line forms
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for commits.Load() < 100 { // every looper at work
		time.Sleep(time.Millisecond)
	}
	var worst, worstExec int64
	for range 50 {
		before := commits.Load()
		var waited int64
		err := s.InTx(ctx, func(store.Querier) error {
			waited = commits.Load() - before
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		worst = max(worst, waited)
		// Outside a transaction a write statement waits in the same line;
		// counted after it returned, a transaction or two that began since
		// may be in the count.
		before = commits.Load()
		if _, err := s.querier.exec(ctx, `INSERT INTO turns VALUES (2)`); err != nil {
			t.Fatal(err)
		}
		worstExec = max(worstExec, commits.Load()-before)
	}
	close(stop)
	wg.Wait()
	if worst > loopers+1 {
		t.Errorf("a transaction waited for %d others'; in line, at most %d are ahead of it", worst, loopers+1)
	}
	if worstExec > loopers+3 {
		t.Errorf("a write statement waited for %d transactions; in line, at most %d are ahead of it", worstExec, loopers+1)
	}
}
