package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/blob"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/table"
)

// cacheTable is six rows in chunks of two; fullOutput is what the
// workload writes for a chunk, before the worker keeps its best rows.
const cacheTable = "id,x\na,1\nb,2\nc,3\nd,4\ne,5\nf,6\n"

func fullOutput(chunk int) string {
	return fmt.Sprintf("id,score\nc%d-a,%d\nc%d-b,%d\nc%d-c,%d\n", chunk, chunk+1, chunk, 2*chunk+5, chunk, 7-chunk)
}

// workerOutput is what a worker keeping topK rows sends for a chunk.
func workerOutput(t *testing.T, chunk, topK int) []byte {
	t.Helper()
	keep, err := table.NewTopK("score", domain.Desc, topK)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := keep.Select(strings.NewReader(fullOutput(chunk)))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := sel.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestChunkCache: a job run by workers that say their workload's version
// is remembered; the same job again is completed at creation from the
// cache, no chunk claimed, with the bytes of a fresh run, and so is one
// with a smaller top_k; changing any part of what an output depends on,
// or "cache": false, runs every chunk (of a changed input, those whose
// bytes changed).
func TestChunkCache(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		blobs, err := blob.OpenDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		e := newEngine(s, engine.Config{Blobs: blobs})
		for _, name := range []string{"ada", "bob"} {
			if _, _, err := e.CreateAccount(ctx, domain.Account{Name: name}); err != nil {
				t.Fatal(err)
			}
		}
		ada := domain.WithCaller(ctx, domain.Caller{Account: "ada"})
		upload := func(caller, body string) string {
			t.Helper()
			u, err := e.CreateUpload(domain.WithCaller(ctx, domain.Caller{Account: caller}), strings.NewReader(body), -1)
			if err != nil {
				t.Fatal(err)
			}
			return u.ID
		}
		version := "v1"
		// run creates the job and runs what the cache leaves to run, by
		// a worker of the current version; it returns the job and how
		// many chunks ran.
		run := func(caller string, sp *domain.JobSpec) (*engine.JobView, int) {
			t.Helper()
			cctx := domain.WithCaller(ctx, domain.Caller{Account: caller})
			// The worker announces its version before the job exists.
			if _, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w-" + version, Workloads: []string{"w"},
				Versions: map[string]string{"w": version}}); err != nil {
				t.Fatal(err)
			}
			v, _, err := e.CreateJob(cctx, sp, "")
			if err != nil {
				t.Fatal(err)
			}
			ran := 0
			for {
				tasks, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w-" + version, Workloads: []string{"w"},
					Versions: map[string]string{"w": version}, Max: 10})
				if err != nil {
					t.Fatal(err)
				}
				if len(tasks) == 0 {
					break
				}
				for _, tk := range tasks {
					ran++
					if _, err := e.CompleteTask(ctx, engine.CompleteTaskParams{TaskID: tk.ID, WorkerID: "w-" + version, Attempt: tk.Attempt,
						Output: workerOutput(t, tk.ChunkIndex, sp.TopK), Version: version}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if _, err := e.StitchReadyJobs(ctx); err != nil {
				t.Fatal(err)
			}
			v, err = e.GetJob(cctx, v.ID)
			if err != nil {
				t.Fatal(err)
			}
			if v.Status != domain.JobCompleted {
				t.Fatalf("job %s is %s (%s)", v.ID, v.Status, v.Error)
			}
			return v, ran
		}
		// fresh is the final CSV of a run of every chunk keeping topK.
		fresh := func(topK int) []byte {
			var outs []table.ChunkOutput
			for i := range 3 {
				outs = append(outs, table.ChunkOutput{Index: i, Data: workerOutput(t, i, topK)})
			}
			var b bytes.Buffer
			if _, err := table.Merge(&b, outs, "score", domain.Desc, topK); err != nil {
				t.Fatal(err)
			}
			return b.Bytes()
		}
		newSpec := func(upload string, topK int) *domain.JobSpec {
			sp := spec(0)
			sp.Chunks, sp.UploadID, sp.ChunkRows, sp.TopK, sp.Parameters = nil, upload, 2, topK, json.RawMessage(`{"q": 1}`)
			return sp
		}
		check := func(what string, v *engine.JobView, ran, wantRan, topK int) {
			t.Helper()
			if ran != wantRan || v.Tasks.Cached != 3-wantRan || v.Cached != 3-wantRan {
				t.Errorf("%s: %d chunks ran and %d came from the cache (job says %d); want %d ran", what, ran, v.Tasks.Cached, v.Cached, wantRan)
			}
			if got := readResult(t, e, v.ID); !bytes.Equal(got, fresh(topK)) {
				t.Errorf("%s: final CSV\n%s\nwant a fresh run's\n%s", what, got, fresh(topK))
			}
		}

		up := upload("ada", cacheTable)
		v, ran := run("ada", newSpec(up, 2))
		check("the first run", v, ran, 3, 2)
		if v.CacheVersion != "v1" {
			t.Errorf("a job created with v1 announced alone was looked up under %q, want v1", v.CacheVersion)
		}
		v, ran = run("ada", newSpec(upload("ada", cacheTable), 2))
		check("the same job on the same table uploaded again", v, ran, 0, 2)
		v, ran = run("ada", newSpec(up, 1))
		check("a smaller top_k", v, ran, 0, 1)
		v, ran = run("ada", newSpec(up, 3))
		check("a larger top_k than the outputs kept", v, ran, 3, 3)

		// Every part of the key, changed, misses.
		changed := map[string]func(sp *domain.JobSpec){
			"parameters":   func(sp *domain.JobSpec) { sp.Parameters = json.RawMessage(`{"q": 2}`) },
			"order":        func(sp *domain.JobSpec) { sp.Order = domain.Asc },
			"score column": func(sp *domain.JobSpec) { sp.ScoreColumn = "other" },
			"has_header":   func(sp *domain.JobSpec) { sp.HasHeader = false },
			"input":        func(sp *domain.JobSpec) { sp.UploadID = upload("ada", strings.Replace(cacheTable, "f,6", "f,7", 1)) },
			"cache: false": func(sp *domain.JobSpec) { sp.NoCache = true },
		}
		for what, change := range changed {
			sp := newSpec(up, 2)
			change(sp)
			j, _, err := e.CreateJob(ada, sp, "")
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			want := 0
			if what == "input" {
				want = 2 // only the last chunk's input changed
			}
			if j.Tasks.Cached != want || j.Tasks.Completed != want {
				t.Errorf("a job with another %s: %d chunks from the cache, %d completed; want %d", what, j.Tasks.Cached, j.Tasks.Completed, want)
			}
			if _, err := e.CancelJob(ada, j.ID); err != nil {
				t.Fatal(err)
			}
		}
		v, ran = run("bob", newSpec(upload("bob", cacheTable), 2))
		check("another owner", v, ran, 3, 2)
		version = "v2"
		v, ran = run("ada", newSpec(up, 2))
		check("another version of the workload", v, ran, 3, 2)

		// With two versions announced, which one runs a job is not known
		// when it is created: a worker's claim completes the chunks whose
		// outputs its version gave, and hands out the others.
		claim := func(worker, version string, max int) []*engine.TaskView {
			t.Helper()
			tasks, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: worker, Workloads: []string{"w"},
				Versions: map[string]string{"w": version}, Max: max})
			if err != nil {
				t.Fatal(err)
			}
			return tasks
		}
		claim("w-v3", "v3", 1) // a third version, never run
		j, _, err := e.CreateJob(ada, newSpec(up, 1), "")
		if err != nil {
			t.Fatal(err)
		}
		if j.Tasks.Cached != 0 || j.CacheVersion != "" {
			t.Errorf("a job created with three versions announced: %d chunks from the cache at creation, looked up under %q; want none", j.Tasks.Cached, j.CacheVersion)
		}
		runs := claim("w-v3", "v3", 1)
		if len(runs) != 1 {
			t.Fatalf("a claim by a version with nothing remembered: %d tasks, want 1", len(runs))
		}
		if got := claim("w-v1", "v1", 10); len(got) != 0 {
			t.Errorf("a claim by v1, whose outputs are remembered for the other two chunks: %d tasks to run, want 0", len(got))
		}
		if _, err := e.CompleteTask(ctx, engine.CompleteTaskParams{TaskID: runs[0].ID, WorkerID: "w-v3", Attempt: runs[0].Attempt,
			Output: workerOutput(t, runs[0].ChunkIndex, 1), Version: "v3"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.StitchReadyJobs(ctx); err != nil {
			t.Fatal(err)
		}
		if v, err = e.GetJob(ada, j.ID); err != nil {
			t.Fatal(err)
		}
		if v.Status != domain.JobCompleted {
			t.Fatalf("the job completed at claims is %s (%s)", v.Status, v.Error)
		}
		check("chunks completed from the cache at claims", v, 1, 1, 1)
		sp := newSpec(up, 1)
		sp.NoCache = true
		if _, _, err := e.CreateJob(ada, sp, ""); err != nil {
			t.Fatal(err)
		}
		if got := claim("w-v1", "v1", 10); len(got) != 3 {
			t.Errorf("a claim by v1 of a job with cache false: %d tasks to run, want 3", len(got))
		}
		if _, err := e.CancelJob(ada, j.ID); err != nil {
			t.Fatal(err)
		}

		// Another coordinator on the same database finds what this one
		// remembered.
		other := newEngine(s, engine.Config{Blobs: blobs})
		if j, _, err = other.CreateJob(ada, newSpec(up, 2), ""); err != nil {
			t.Fatal(err)
		}
		if got, err := other.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w-v1", Workloads: []string{"w"},
			Versions: map[string]string{"w": "v1"}, Max: 10}); err != nil || len(got) != 0 {
			t.Errorf("a claim by v1 on another coordinator: %d tasks to run (%v), want 0", len(got), err)
		}
		if _, err := other.StitchReadyJobs(ctx); err != nil {
			t.Fatal(err)
		}
		if v, err = other.GetJob(ada, j.ID); err != nil || v.Status != domain.JobCompleted {
			t.Fatalf("the job on another coordinator: %v (%v)", v.Status, err)
		}
		check("on another coordinator", v, 0, 0, 2)

		// Retention deletes the jobs, and the entries of their outputs go
		// with them: the same job runs every chunk again.
		dj, err := s.JobGet(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := s.TaskList(ctx, &store.TaskListParams{JobID: j.ID, Kind: domain.KindChunk, Limit: 10, AfterIndex: -1})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, c := range chunks {
			keys = append(keys, engine.CacheKey(dj, "v1", c.InputSHA256))
		}
		remembered := func() int {
			t.Helper()
			got, err := s.CacheGet(ctx, keys)
			if err != nil {
				t.Fatal(err)
			}
			return len(got)
		}
		if n := remembered(); n != 3 {
			t.Fatalf("before retention, %d of the job's 3 chunks are remembered under v1", n)
		}
		if _, err := e.PruneExpired(ctx, engine.PruneExpiredParams{Retention: time.Nanosecond}); err != nil {
			t.Fatal(err)
		}
		if n := remembered(); n != 0 {
			t.Errorf("after retention deleted the jobs, %d entries remain", n)
		}
		if _, _, err = e.CreateJob(ada, newSpec(up, 2), ""); err != nil {
			t.Fatal(err)
		}
		if got := claim("w-v1", "v1", 10); len(got) != 3 {
			t.Errorf("a claim by v1 after retention deleted the remembered outputs: %d tasks to run, want 3", len(got))
		}
	})
}

// TestChunkCacheTrustedOnly: what an untrusted key's worker gives is not
// remembered, even for its own account's job: a job that only trusted
// workers may run could otherwise take it.
func TestChunkCacheTrustedOnly(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := t.Context()
	blobs, err := blob.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(s, engine.Config{Blobs: blobs})
	if _, _, err := e.CreateAccount(ctx, domain.Account{Name: "ada"}); err != nil {
		t.Fatal(err)
	}
	ada := domain.WithCaller(ctx, domain.Caller{Account: "ada"})
	u, err := e.CreateUpload(ada, strings.NewReader(cacheTable), -1)
	if err != nil {
		t.Fatal(err)
	}
	sp := spec(0)
	sp.Chunks, sp.UploadID, sp.ChunkRows, sp.TopK, sp.Workers = nil, u.ID, 2, 2, domain.WorkersOwn
	laptop := key(ctx, "ada")
	claim := engine.ClaimTasksParams{WorkerID: "laptop", Workloads: []string{"w"}, Versions: map[string]string{"w": "v1"}, Max: 10}
	if _, err := e.ClaimTasks(laptop, claim); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.CreateJob(ada, sp, ""); err != nil {
		t.Fatal(err)
	}
	tasks, err := e.ClaimTasks(laptop, claim)
	if err != nil || len(tasks) != 3 {
		t.Fatalf("the key's claim: %d tasks, %v", len(tasks), err)
	}
	for _, tk := range tasks {
		if _, err := e.CompleteTask(laptop, engine.CompleteTaskParams{TaskID: tk.ID, WorkerID: "laptop", Attempt: tk.Attempt,
			Output: workerOutput(t, tk.ChunkIndex, 2), Version: "v1"}); err != nil {
			t.Fatal(err)
		}
	}
	again, _, err := e.CreateJob(ada, sp, "")
	if err != nil {
		t.Fatal(err)
	}
	if again.Tasks.Cached != 0 {
		t.Errorf("the same job after an untrusted key ran it: %d chunks from the cache, want 0", again.Tasks.Cached)
	}
}

// cacheReads counts the engine's reads of the chunk cache.
type cacheReads struct {
	store.Store
	n atomic.Int64
}

func (s *cacheReads) CacheGet(ctx context.Context, keys []string) (map[string]store.CacheEntry, error) {
	s.n.Add(1)
	return s.Store.CacheGet(ctx, keys)
}

// TestChunkCacheLookedUpOnce: a job created while its workload's version
// is known looks its chunks up at creation, and claims by a worker of
// that version look them up no more; a worker of another version's claim
// does.
func TestChunkCacheLookedUpOnce(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		s := &cacheReads{Store: st}
		e := newEngine(s, engine.Config{})
		claim := func(version string) []*engine.TaskView {
			t.Helper()
			tasks, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w-" + version, Workloads: []string{"w"},
				Versions: map[string]string{"w": version}, Max: 1})
			if err != nil {
				t.Fatal(err)
			}
			return tasks
		}
		claim("v1") // announces v1 before the job exists
		if _, _, err := e.CreateJob(ctx, spec(3), ""); err != nil {
			t.Fatal(err)
		}
		if n := s.n.Load(); n != 1 {
			t.Fatalf("%d cache reads at the creation, want 1", n)
		}
		if got := claim("v1"); len(got) != 1 {
			t.Fatalf("v1's claim: %d tasks, want 1", len(got))
		}
		if n := s.n.Load(); n != 1 {
			t.Errorf("%d cache reads after a claim by the version looked up at creation, want still 1", n)
		}
		if got := claim("v2"); len(got) != 1 {
			t.Fatalf("v2's claim: %d tasks, want 1", len(got))
		}
		if n := s.n.Load(); n != 2 {
			t.Errorf("%d cache reads after a claim by another version, want 2", n)
		}
	})
}
