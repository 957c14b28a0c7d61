package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// The client's settings: those of River's own benchmark (river bench),
// which its authors chose for throughput; River's defaults are a 100 ms
// cooldown, a 1 s poll interval and 100 workers.
const (
	fetchCooldown     = 2 * time.Millisecond
	fetchPollInterval = 20 * time.Millisecond
	maxWorkers        = 2000
	// insertBatch is how many jobs one InsertManyFast (COPY FROM) takes.
	insertBatch = 5000
)

// noopArgs are the arguments of a job that does nothing.
type noopArgs struct{}

// Kind is the job kind River stores and dispatches on.
func (noopArgs) Kind() string { return "noop" }

// noopWorker works noop jobs by returning at once.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

// Work does nothing.
func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// result is what one run measured.
type result struct {
	jobs    int
	insert  time.Duration // inserting the jobs, before the client starts
	elapsed time.Duration // from the client's start to the last completion
}

func (r result) rate() float64 { return float64(r.jobs) / r.elapsed.Seconds() }

// String is the run's line, e.g. "50000 jobs in 1.52s = 32,900 jobs/s
// (workers 2000, fetch cooldown 2ms, poll 20ms; inserted in 0.61s)".
func (r result) String() string {
	return fmt.Sprintf("%d jobs in %s = %s jobs/s (workers %d, fetch cooldown %v, poll %v; inserted in %s)",
		r.jobs, seconds(r.elapsed), thousands(r.rate()), maxWorkers, fetchCooldown, fetchPollInterval, seconds(r.insert))
}

// runOnce migrates the database at url, empties River's job table, inserts
// n no-op jobs and times a new client from its start until it has completed
// them all, as its completion events tell.
func runOnce(ctx context.Context, url string, n int, logger *slog.Logger) (result, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return result{}, fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: logger})
	if err != nil {
		return result{}, fmt.Errorf("river migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return result{}, fmt.Errorf("river migrations: %w", err)
	}
	// A table emptied and rewritten, as River's benchmark does, so that no
	// run inherits the dead rows of the one before.
	for _, sql := range []string{"TRUNCATE river_job", "VACUUM FULL river_job"} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			return result{}, fmt.Errorf("%s: %w", sql, err)
		}
	}

	workers := river.NewWorkers()
	river.AddWorker(workers, noopWorker{})
	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown:     fetchCooldown,
		FetchPollInterval: fetchPollInterval,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers:           workers,
		Logger:            logger,
	})
	if err != nil {
		return result{}, fmt.Errorf("river client: %w", err)
	}

	insertStart := time.Now()
	if err := insert(ctx, client, n); err != nil {
		return result{}, err
	}
	res := result{jobs: n, insert: time.Since(insertStart)}

	// A channel as large as the run, so that River drops no event.
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: n,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer cancel()

	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return result{}, fmt.Errorf("start the river client: %w", err)
	}
	waitErr := waitAll(ctx, events, n, deadline(n))
	res.elapsed = time.Since(start)
	stopCtx, stopCancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer stopCancel()
	if err := errors.Join(waitErr, client.Stop(stopCtx)); err != nil {
		return result{}, err
	}

	var completed int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&completed); err != nil {
		return result{}, fmt.Errorf("count completed jobs: %w", err)
	}
	if completed != n {
		return result{}, fmt.Errorf("%d completion events, but %d of the %d jobs are completed in river_job", n, completed, n)
	}
	return res, nil
}

// insert inserts n no-op jobs in batches through COPY FROM.
func insert(ctx context.Context, client *river.Client[pgx.Tx], n int) error {
	batch := make([]river.InsertManyParams, insertBatch)
	for i := range batch {
		batch[i].Args = noopArgs{}
	}
	for left := n; left > 0; left -= insertBatch {
		b := batch[:min(left, insertBatch)]
		if _, err := client.InsertManyFast(ctx, b); err != nil {
			return fmt.Errorf("insert %d jobs: %w", len(b), err)
		}
	}
	return nil
}

// waitAll receives events until n jobs finished, and fails if any of them
// did not complete, or if they are not all done within limit.
func waitAll(ctx context.Context, events <-chan *river.Event, n int, limit time.Duration) error {
	timeout := time.NewTimer(limit)
	defer timeout.Stop()
	for done := 0; done < n; done++ {
		select {
		case ev, ok := <-events:
			if !ok {
				return fmt.Errorf("the completion subscription closed after %d of %d jobs", done, n)
			}
			if ev.Kind != river.EventKindJobCompleted {
				return fmt.Errorf("job %d: %s, not completed", ev.Job.ID, ev.Kind)
			}
		case <-timeout.C:
			return fmt.Errorf("only %d of %d jobs completed within %v", done, n, limit)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// deadline is how long n jobs may take, at 500 jobs/s or more, and never
// less than a minute: a bound for a stuck run, far beyond a slow one.
func deadline(n int) time.Duration {
	return max(time.Minute, time.Duration(n)*2*time.Millisecond)
}
