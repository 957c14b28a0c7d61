package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/blob"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/engine/enginetest"
	"github.com/scimesh/scimesh/internal/pgtest"
	"github.com/scimesh/scimesh/internal/s3test"
	"github.com/scimesh/scimesh/internal/store"
)

const (
	day            = 24 * time.Hour
	keepJobs       = 30 * day
	keepUploads    = 7 * day
	retentionBatch = 3
)

// retentionBundle is an engine with a data directory on a test clock.
type retentionBundle struct {
	dir   string // of the blob store
	e     *engine.Engine
	s     store.Store
	blobs blob.Store
	clock *enginetest.Clock
}

func newRetention(t *testing.T, s store.Store) *retentionBundle {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "blobs")
	blobs, err := blob.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := enginetest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	e := newEngine(s, engine.Config{Now: c.Now, Blobs: blobs, RetentionBatch: retentionBatch})
	return &retentionBundle{dir: dir, e: e, s: s, blobs: blobs, clock: c}
}

// upload stores a table of rows data rows.
func (b *retentionBundle) upload(t *testing.T, rows int) *domain.Upload {
	t.Helper()
	var sb strings.Builder
	sb.WriteString("id,x\n")
	for i := range rows {
		fmt.Fprintf(&sb, "r%d,%d\n", i, i)
	}
	u, err := b.e.CreateUpload(t.Context(), strings.NewReader(sb.String()), -1)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// job creates a job of workload w over upload u (hosted chunks when u is
// nil) of n chunks.
func (b *retentionBundle) job(t *testing.T, w string, u *domain.Upload, n int) *engine.JobView {
	t.Helper()
	sp := spec(n)
	sp.Workload = w
	if u != nil {
		sp.Chunks, sp.UploadID, sp.ChunkRows = nil, u.ID, 1
	}
	v, _, err := b.e.CreateJob(t.Context(), sp, "")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// complete runs every chunk of the job to completion, with a log line
// each, and stitches it.
func (b *retentionBundle) complete(t *testing.T, jobID string) {
	t.Helper()
	ctx := t.Context()
	for {
		tasks, err := b.e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w", Max: 100, Workloads: []string{"w"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) == 0 {
			break
		}
		var items []engine.CompleteTaskParams
		for _, tk := range tasks {
			if tk.JobID != jobID {
				t.Fatalf("claimed task %s of job %s, want only job %s's", tk.ID, tk.JobID, jobID)
			}
			err := b.e.AppendLogs(ctx, engine.AppendLogsParams{TaskID: tk.ID, WorkerID: "w", Attempt: tk.Attempt, Lines: []string{"working", "done"}})
			if err != nil {
				t.Fatal(err)
			}
			items = append(items, engine.CompleteTaskParams{TaskID: tk.ID, WorkerID: "w", Attempt: tk.Attempt, Output: []byte("id,score\na,1\n")})
		}
		for _, r := range b.e.CompleteTasks(ctx, items) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	if _, err := b.e.StitchReadyJobs(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := b.e.GetJob(ctx, jobID); err != nil || v.Status != domain.JobCompleted {
		t.Fatalf("job %s after its chunks: %+v, %v; want completed", jobID, v, err)
	}
}

// tree submits and runs a two-task tree to completion and returns its
// root's ID and every task's.
func (b *retentionBundle) tree(t *testing.T) (string, []string) {
	t.Helper()
	ctx := t.Context()
	ids, root, err := b.e.SubmitTree(ctx, &domain.TreeSpec{Tasks: []domain.TreeTaskSpec{
		{ID: "s0:root", Workload: "sum", Args: []domain.TreeArg{{Ref: "s0:a"}}},
		{ID: "s0:a", Workload: "num", Args: []domain.TreeArg{{Value: json.RawMessage("1")}}},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		tk, err := b.e.PollTree(ctx, "w", nil, 0)
		if err != nil || tk == nil {
			t.Fatalf("PollTree = %+v, %v", tk, err)
		}
		if err := b.e.CompleteTree(ctx, tk.ID, "w", tk.Attempt, json.RawMessage("1")); err != nil {
			t.Fatal(err)
		}
	}
	return root, []string{ids["s0:root"], ids["s0:a"]}
}

// checkGone checks that a job is 404 on every read a client has.
func checkGone(t *testing.T, e *engine.Engine, v *engine.JobView, taskIDs ...string) {
	t.Helper()
	ctx := t.Context()
	_, err := e.GetJob(ctx, v.ID)
	checkNotFound(t, "GetJob of job "+v.ID, err)
	_, _, err = e.ListTasks(ctx, engine.ListTasksParams{JobID: v.ID})
	checkNotFound(t, "ListTasks of job "+v.ID, err)
	_, err = e.OpenJobResult(ctx, v.ID)
	checkNotFound(t, "JobResult of job "+v.ID, err)
	for _, id := range taskIDs {
		_, err := e.GetTask(ctx, id)
		checkNotFound(t, "GetTask "+id, err)
		_, err = e.ListLogs(ctx, id, 0, 10)
		checkNotFound(t, "Logs of task "+id, err)
	}
}

func checkNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("%s = %v, want ErrNotFound", what, err)
	}
}

func chunkIDs(jobID string, n int) []string {
	out := []string{jobID + "-root"}
	for i := range n {
		out = append(out, fmt.Sprintf("%s-%d", jobID, i))
	}
	return out
}

// Names of blobs no row names, shaped as SciMesh's.
const (
	orphanKey = "u-0000000000000000000000aa"
	youngKey  = "u-0000000000000000000000bb"
)

func blobExists(t *testing.T, b blob.Store, key string) bool {
	t.Helper()
	f, err := b.OpenRange(t.Context(), key, 0, -1)
	if errors.Is(err, blob.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	return true
}

// TestRetentionDeletesWhatIsDue moves the clock past the retention: the
// old finished job (more tasks than a batch), its upload, an unused upload
// and a finished tree are gone from the database and the disk; a running
// job, a pending job with its upload, and a recent job are untouched. A
// second pass finds nothing.
func TestRetentionDeletesWhatIsDue(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		b := newRetention(t, s)
		ctx := t.Context()
		oldUp := b.upload(t, 7)
		old := b.job(t, "w", oldUp, 7) // 7 chunks + root: three batches of 3
		b.complete(t, old.ID)
		root, treeTasks := b.tree(t)
		unused := b.upload(t, 2)

		b.clock.Advance(keepJobs + day)
		running := b.job(t, "slow", nil, 2)
		claimed, err := b.e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w", Workloads: []string{"slow"}})
		if err != nil || len(claimed) != 1 || claimed[0].JobID != running.ID {
			t.Fatalf("claim of the running job: %+v, %v", claimed, err)
		}
		pendingUp := b.upload(t, 3)
		pending := b.job(t, "slow", pendingUp, 3)
		b.clock.Advance(keepUploads + day) // the pending job's upload is old too
		recent := b.job(t, "w", nil, 1)
		b.complete(t, recent.ID)

		r, err := b.e.PruneExpired(ctx, engine.PruneExpiredParams{Retention: keepJobs, UploadRetention: keepUploads})
		if err != nil {
			t.Fatal(err)
		}
		if r.Jobs != 1 || r.Trees != 1 || r.Tasks != 8+2 || r.Logs != 7*2 || r.Uploads != 2 || r.Args != 2 {
			t.Errorf("report %+v; want 1 job, 1 tree, 10 tasks, 14 log lines, 2 arguments, 2 uploads", r)
		}
		checkGone(t, b.e, old, chunkIDs(old.ID, 7)...)
		for _, id := range treeTasks {
			_, err := b.e.GetTask(ctx, id)
			checkNotFound(t, "GetTask of a task of the finished tree "+root, err)
		}
		for _, u := range []*domain.Upload{oldUp, unused} {
			if _, err := s.UploadGet(ctx, u.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("upload %s: %v, want it deleted", u.ID, err)
			}
			if blobExists(t, b.blobs, u.BlobKey) {
				t.Errorf("the file of upload %s is still on disk", u.ID)
			}
		}
		for _, v := range []*engine.JobView{running, pending, recent} {
			got, err := b.e.GetJob(ctx, v.ID)
			if err != nil || got.Tasks.Total != v.ChunkCount {
				t.Errorf("job %s after the pass: %+v, %v; want it whole", v.ID, got, err)
			}
		}
		if got, err := b.e.GetJob(ctx, running.ID); err != nil || got.Status != domain.JobRunning {
			t.Errorf("the running job after the pass: %+v, %v", got, err)
		}
		if _, err := s.UploadGet(ctx, pendingUp.ID); err != nil || !blobExists(t, b.blobs, pendingUp.BlobKey) {
			t.Errorf("the pending job's upload after the pass: %v (file there: %v)", err, blobExists(t, b.blobs, pendingUp.BlobKey))
		}
		if in, err := b.e.OpenTaskInput(ctx, pending.ID+"-0"); err != nil {
			t.Errorf("input of the pending job's chunk: %v", err)
		} else {
			in.Close()
		}
		again, err := b.e.PruneExpired(ctx, engine.PruneExpiredParams{Retention: keepJobs, UploadRetention: keepUploads})
		if err != nil || again.Total() != 0 {
			t.Errorf("a second pass = %+v, %v; want nothing to delete", again, err)
		}
	})
}

// TestRetentionKeepsUploadsOfRetriableJobs: a failed or cancelled job may
// be retried, so its upload stays while the job does; once the job itself
// is deleted, the upload goes in the same pass.
func TestRetentionKeepsUploadsOfRetriableJobs(t *testing.T) {
	t.Parallel()
	b := newRetention(t, openStore(t))
	ctx := t.Context()
	u := b.upload(t, 2)
	v := b.job(t, "w", u, 2)
	if _, err := b.e.CancelJob(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(keepUploads + day)
	r, err := b.e.PruneExpired(ctx, engine.PruneExpiredParams{Retention: keepJobs, UploadRetention: keepUploads})
	if err != nil || r.Uploads != 0 || r.Jobs != 0 {
		t.Fatalf("pass before the job's retention = %+v, %v; want the upload of a cancelled job kept", r, err)
	}
	b.clock.Advance(keepJobs)
	r, err = b.e.PruneExpired(ctx, engine.PruneExpiredParams{Retention: keepJobs, UploadRetention: keepUploads})
	if err != nil || r.Jobs != 1 || r.Uploads != 1 {
		t.Fatalf("pass after the job's retention = %+v, %v; want the job and its upload deleted", r, err)
	}
	if blobExists(t, b.blobs, u.BlobKey) {
		t.Error("the upload's file survived its row")
	}
}

// crashingStore fails the n-th TaskDelete, as a coordinator killed between
// two batches would stop.
type crashingStore struct {
	store.Store
	mu      sync.Mutex
	deletes int
	crashAt int
	maxIDs  int // the most tasks one TaskDelete was asked to delete
}

var errCrash = errors.New("killed between two batches")

func (c *crashingStore) InTx(ctx context.Context, fn func(q store.Querier) error) error {
	return c.Store.InTx(ctx, func(q store.Querier) error { return fn(&crashingQuerier{Querier: q, c: c}) })
}

type crashingQuerier struct {
	store.Querier
	c *crashingStore
}

func (q *crashingQuerier) TaskDelete(ctx context.Context, p *store.TaskDeleteParams) (store.TaskDeleted, error) {
	q.c.mu.Lock()
	q.c.deletes++
	q.c.maxIDs = max(q.c.maxIDs, len(p.IDs))
	crash := q.c.deletes == q.c.crashAt
	q.c.mu.Unlock()
	if crash {
		return store.TaskDeleted{}, errCrash
	}
	return q.Querier.TaskDelete(ctx, p)
}

// TestRetentionCrashBetweenBatches stops a pass after the first batch of a
// job's tasks: the job is already 404 everywhere, and the next pass (of a
// coordinator started afresh) removes the rest.
func TestRetentionCrashBetweenBatches(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	crashing := &crashingStore{Store: s, crashAt: 2}
	b := newRetention(t, crashing)
	ctx := t.Context()
	v := b.job(t, "w", nil, 8)
	b.complete(t, v.ID)
	b.clock.Advance(keepJobs + day)
	_, err := b.e.PruneExpired(ctx, engine.PruneExpiredParams{Retention: keepJobs})
	if !errors.Is(err, errCrash) {
		t.Fatalf("Prune = %v, want the crash", err)
	}
	if crashing.maxIDs > retentionBatch {
		t.Errorf("a batch deleted %d tasks, more than the batch of %d", crashing.maxIDs, retentionBatch)
	}
	left, err := s.TaskListIDs(ctx, &store.TaskListIDsParams{JobID: v.ID})
	if err != nil || len(left) == 0 || len(left) >= 9 {
		t.Fatalf("tasks left after the crash: %d (%v); want some, not all", len(left), err)
	}
	fresh := newEngine(s, engine.Config{Now: b.clock.Now, RetentionBatch: retentionBatch})
	checkGone(t, fresh, v, chunkIDs(v.ID, 8)...)
	checkGone(t, b.e, v, chunkIDs(v.ID, 8)...)

	r, err := fresh.PruneExpired(ctx, engine.PruneExpiredParams{Retention: keepJobs})
	if err != nil || r.Jobs != 0 || r.Tasks != len(left) || r.PurgesFinished != 1 {
		t.Fatalf("the next pass = %+v, %v; want the %d tasks left and the purge finished", r, err, len(left))
	}
	if ids, _ := s.TaskListIDs(ctx, &store.TaskListIDsParams{JobID: v.ID}); len(ids) != 0 {
		t.Errorf("tasks left after the second pass: %v", ids)
	}
	if p, _ := s.PurgeList(ctx, 0); len(p) != 0 {
		t.Errorf("purges left after the second pass: %+v", p)
	}
}

// TestRetentionTwoEnginesAtOnce runs passes of two coordinators sharing a
// database at the same time: each row is deleted once, counted once, and
// neither fails.
func TestRetentionTwoEnginesAtOnce(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, a, b store.Store) {
		ba := newRetention(t, a)
		eb := newEngine(b, engine.Config{Now: ba.clock.Now, Blobs: ba.blobs, RetentionBatch: retentionBatch})
		const jobs, chunks = 12, 4
		for range jobs {
			ba.complete(t, ba.job(t, "w", nil, chunks).ID)
		}
		ba.clock.Advance(keepJobs + day)
		var wg sync.WaitGroup
		reports := make([]*engine.PruneReport, 2)
		errs := make([]error, 2)
		for i, e := range []*engine.Engine{ba.e, eb} {
			wg.Go(func() {
				reports[i], errs[i] = e.PruneExpired(t.Context(), engine.PruneExpiredParams{Retention: keepJobs, UploadRetention: keepUploads})
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		gotJobs, gotTasks, gotLogs := reports[0].Jobs+reports[1].Jobs, reports[0].Tasks+reports[1].Tasks, reports[0].Logs+reports[1].Logs
		if gotJobs != jobs || gotTasks != jobs*(chunks+1) || gotLogs != jobs*chunks*2 {
			t.Errorf("two passes deleted %d jobs, %d tasks, %d log lines; want %d, %d, %d",
				gotJobs, gotTasks, gotLogs, jobs, jobs*(chunks+1), jobs*chunks*2)
		}
		if n, err := a.TaskCountByState(t.Context()); err != nil || len(n) != 0 {
			t.Errorf("tasks left: %+v, %v", n, err)
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		s := openStore(t)
		run(t, s, s)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := pgtest.URL(t)
		run(t, openPG(t, url), openPG(t, url))
	})
}

// TestPruneDryRunAndOrphans: a dry run counts what is due and deletes
// nothing; a real pass removes files no row names and temporary files
// left behind, once an hour old, and keeps younger ones.
func TestPruneDryRunAndOrphans(t *testing.T) {
	t.Parallel()
	b := newRetention(t, openStore(t))
	ctx := t.Context()
	u := b.upload(t, 2)
	v := b.job(t, "w", nil, 2)
	b.complete(t, v.ID)
	dir := b.dir
	old := time.Now().Add(-2 * engine.OrphanAge)
	for _, f := range []string{"files/" + orphanKey, "files/" + youngKey, "tmp/blob-123456"} {
		p := filepath.Join(dir, f)
		if err := os.WriteFile(p, []byte("abcd"), 0o644); err != nil {
			t.Fatal(err)
		}
		if f != "files/"+youngKey {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The upload's own file is old too, but named by its row.
	if err := os.Chtimes(filepath.Join(dir, "files", u.BlobKey), old, old); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(keepJobs + day)
	dry, err := b.e.PruneExpired(ctx, engine.PruneExpiredParams{Retention: keepJobs, UploadRetention: keepUploads, DryRun: true})
	if err != nil || dry.Jobs != 1 || dry.Uploads != 1 || dry.Files != 2 || dry.FileBytes != 8 || dry.Tasks != 0 {
		t.Fatalf("dry run = %+v, %v; want 1 job, 1 upload, 2 files of 8 bytes", dry, err)
	}
	if _, err := b.e.GetJob(ctx, v.ID); err != nil {
		t.Fatalf("a dry run deleted the job: %v", err)
	}
	for _, f := range []string{"files/" + orphanKey, "files/" + youngKey, "tmp/blob-123456", "files/" + u.BlobKey} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("a dry run removed %s: %v", f, err)
		}
	}
	r, err := b.e.PruneExpired(ctx, engine.PruneExpiredParams{Retention: keepJobs, UploadRetention: keepUploads})
	if err != nil || r.Jobs != 1 || r.Uploads != 1 || r.Files != 2 {
		t.Fatalf("pass = %+v, %v", r, err)
	}
	for f, want := range map[string]bool{"files/" + orphanKey: false, "tmp/blob-123456": false, "files/" + youngKey: true, "files/" + u.BlobKey: false} {
		_, err := os.Stat(filepath.Join(dir, f))
		if got := err == nil; got != want {
			t.Errorf("%s exists: %v, want %v", f, got, want)
		}
	}
}

// TestRetentionOnABucket runs retention with the uploads in a real S3
// bucket: a deleted upload's object goes, an object no row names goes once
// older than the orphan age, and an upload a pending job needs stays.
func TestRetentionOnABucket(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bucket, err := blob.OpenBucket(ctx, s3test.Bucket(t))
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	c := enginetest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	b := &retentionBundle{s: openStore(t), blobs: bucket, clock: c}
	b.e = newEngine(b.s, engine.Config{Now: c.Now, Blobs: bucket, RetentionBatch: retentionBatch})
	old := b.upload(t, 2)
	v := b.job(t, "w", old, 2)
	b.complete(t, v.ID)
	kept := b.upload(t, 2)
	b.job(t, "other", kept, 2) // pending: needs its upload
	putOrphan(t, bucket)
	b.clock.Advance(keepJobs + day)
	r, err := b.e.PruneExpired(ctx, engine.PruneExpiredParams{Retention: keepJobs, UploadRetention: keepUploads, OrphanAge: time.Second})
	if err != nil || r.Jobs != 1 || r.Uploads != 1 || r.Files != 1 || r.FileBytes != 4 {
		t.Fatalf("pass = %+v, %v; want 1 job, 1 upload, 1 orphan of 4 bytes", r, err)
	}
	for key, want := range map[string]bool{old.BlobKey: false, orphanKey: false, kept.BlobKey: true} {
		if got := blobExists(t, bucket, key); got != want {
			t.Errorf("object %s exists: %v, want %v", key, got, want)
		}
	}
}

// foreignNames are names another application may give its files beside
// SciMesh's blobs.
var foreignNames = []string{"latest", "checkpoint-7", "notes.txt"}

// TestSweepTouchesOnlyItsOwn puts another application's files (in a
// bucket, objects and unfinished multipart uploads) named latest,
// checkpoint-7 and notes.txt where the blobs are, as old as the orphans
// beside them: a pass removes SciMesh's orphans and leftovers and leaves
// the others' things alone.
func TestSweepTouchesOnlyItsOwn(t *testing.T) {
	t.Parallel()
	t.Run("files", func(t *testing.T) {
		t.Parallel()
		b := newRetention(t, openStore(t))
		old := time.Now().Add(-engine.OrphanAge - time.Minute)
		var foreign []string
		for _, name := range foreignNames {
			for _, sub := range []string{"", "files", "tmp"} {
				foreign = append(foreign, filepath.Join(sub, name))
			}
		}
		own := []string{"files/" + orphanKey, "tmp/blob-123456"}
		for _, f := range append(append([]string{}, foreign...), own...) {
			p := filepath.Join(b.dir, f)
			if err := os.WriteFile(p, []byte("abcd"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
		r, err := b.e.PruneExpired(t.Context(), engine.PruneExpiredParams{})
		if err != nil || r.Files != len(own) {
			t.Fatalf("pass = %+v, %v; want the %d orphans of SciMesh removed", r, err, len(own))
		}
		for _, f := range foreign {
			if _, err := os.Stat(filepath.Join(b.dir, f)); err != nil {
				t.Errorf("the other application's %s: %v", f, err)
			}
		}
		for _, f := range own {
			if _, err := os.Stat(filepath.Join(b.dir, f)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("SciMesh's orphan %s: %v, want it removed", f, err)
			}
		}
	})
	t.Run("s3", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		rawURL := s3test.Bucket(t)
		bucket, err := blob.OpenBucket(ctx, rawURL)
		if err != nil {
			t.Fatal(err)
		}
		defer bucket.Close()
		e := newEngine(openStore(t), engine.Config{Blobs: bucket})
		uploads := map[string]string{}
		for _, name := range foreignNames {
			s3test.Put(t, rawURL, name, []byte("theirs"))
			uploads[s3test.StartUpload(t, rawURL, name)] = name
		}
		putOrphan(t, bucket)
		r, err := e.PruneExpired(ctx, engine.PruneExpiredParams{OrphanAge: time.Second})
		if err != nil || r.Files != 1 {
			t.Fatalf("pass = %+v, %v; want SciMesh's one orphan removed", r, err)
		}
		objects := s3test.Objects(t, rawURL)
		for _, name := range foreignNames {
			if !slices.Contains(objects, name) {
				t.Errorf("the other application's object %s is gone; objects: %v", name, objects)
			}
		}
		if slices.Contains(objects, orphanKey) {
			t.Errorf("SciMesh's orphan %s survived the pass", orphanKey)
		}
		if got := s3test.Uploads(t, rawURL); !maps.Equal(got, uploads) {
			t.Errorf("unfinished uploads after the pass: %v, want the other application's %v", got, uploads)
		}
	})
}

// putOrphan writes an object of SciMesh's name that no row names into
// bucket, and waits until it is at least a second old (S3 keeps times to
// the second).
func putOrphan(t *testing.T, bucket blob.Store) {
	t.Helper()
	w, err := bucket.Create(t.Context(), orphanKey)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("abcd"))
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
}

// TestRetentionDeletesOldUsage: a pass deletes usage older than the
// jobs' retention, in batches, and keeps the rest; retention 0 keeps it
// all.
func TestRetentionDeletesOldUsage(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		b := newRetention(t, s)
		ctx := t.Context()
		job := b.job(t, "w", nil, 1)
		b.complete(t, job.ID) // charged now
		start := b.clock.Now().Truncate(time.Hour)
		var rows []store.UsageRow
		for i := range 6 { // six more hours of another account, before it
			rows = append(rows, store.UsageRow{Hour: start.Add(-time.Duration(i+1) * time.Hour), Account: "ada", Workload: "w", Tasks: 1, WorkerMicros: 1})
		}
		if err := s.UsageAdd(ctx, rows); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(keepJobs + day)
		recent := b.job(t, "w", nil, 1)
		b.complete(t, recent.ID)
		usage := func() []engine.UsageEntry {
			t.Helper()
			got, err := b.e.ListUsage(ctx, engine.ListUsageParams{})
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		if got := usage(); len(got) != 2 || got[0].Tasks != 6 || got[1].Tasks != 2 {
			t.Fatalf("usage before the passes: %+v; want ada's 6 and admin's 2", got)
		}
		r, err := b.e.PruneExpired(ctx, engine.PruneExpiredParams{})
		if err != nil || r.Usage != 0 {
			t.Errorf("a pass with retention 0 = %+v, %v; want no usage deleted", r, err)
		}
		r, err = b.e.PruneExpired(ctx, engine.PruneExpiredParams{Retention: keepJobs})
		if err != nil || r.Usage != 7 {
			t.Errorf("a pass = %+v, %v; want the 7 old rows of usage deleted, %d at a time", r, err, retentionBatch)
		}
		if got := usage(); len(got) != 1 || got[0].Account != "admin" || got[0].Tasks != 1 {
			t.Errorf("usage after the pass: %+v; want the recent job's attempt", got)
		}
	})
}
