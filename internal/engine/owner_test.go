package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/blob"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
)

// TestOwnership: what one account makes, another cannot see or change:
// every read and change a client can ask for answers another account's
// job, task, log, upload or tree exactly as one that does not exist, and
// changes nothing; an admin sees and lists everyone's.
func TestOwnership(t *testing.T) {
	t.Parallel()
	blobs, err := blob.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(openStore(t), engine.Config{Shard: "s0", Blobs: blobs})
	ada := domain.WithCaller(t.Context(), domain.Caller{Account: "ada"})
	bob := domain.WithCaller(t.Context(), domain.Caller{Account: "bob"})
	root := domain.WithCaller(t.Context(), domain.Caller{Account: "root", Admin: true})

	up, err := e.CreateUpload(ada, strings.NewReader("id,x\na,1\nb,2\n"), -1)
	if err != nil {
		t.Fatal(err)
	}
	js := spec(0)
	js.Chunks, js.UploadID, js.ChunkRows = nil, up.ID, 1
	job, _, err := e.CreateJob(ada, js, "key-1")
	if err != nil {
		t.Fatal(err)
	}
	if job.Owner != "ada" {
		t.Fatalf("job owner = %q, want ada", job.Owner)
	}
	tasks, _, err := e.ListTasks(ada, engine.ListTasksParams{JobID: job.ID})
	if err != nil || len(tasks) != 2 {
		t.Fatalf("ada's ListTasks = %d tasks, %v", len(tasks), err)
	}
	chunk := tasks[0]
	if chunk.Owner != "ada" {
		t.Fatalf("chunk owner = %q, want ada", chunk.Owner)
	}
	ids, treeRoot, err := e.SubmitTree(ada, &domain.TreeSpec{Tasks: []domain.TreeTaskSpec{
		{ID: "s0:r", Workload: "sum", Args: []domain.TreeArg{{Ref: "s0:a"}}},
		{ID: "s0:a", Workload: "num"},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}

	// Each of bob's calls must fail as for an object that never existed:
	// the same error, word for word but for the ID.
	same := func(what, id, missing string, call func(ctx context.Context, id string) error) {
		t.Helper()
		got := call(bob, id)
		if !errors.Is(got, domain.ErrNotFound) {
			t.Errorf("bob's %s(%s) = %v, want ErrNotFound", what, id, got)
			return
		}
		want := call(bob, missing)
		if want == nil {
			t.Fatalf("%s of a missing object succeeded", what)
		}
		if g, w := strings.ReplaceAll(got.Error(), id, "ID"), strings.ReplaceAll(want.Error(), missing, "ID"); g != w {
			t.Errorf("bob's %s says %q; of a missing one, %q", what, g, w)
		}
	}
	jobCalls := map[string]func(ctx context.Context, id string) error{
		"GetJob":    func(ctx context.Context, id string) error { _, err := e.GetJob(ctx, id); return err },
		"CancelJob": func(ctx context.Context, id string) error { _, err := e.CancelJob(ctx, id); return err },
		"RetryJob":  func(ctx context.Context, id string) error { _, err := e.RetryJob(ctx, id); return err },
		"WaitJob": func(ctx context.Context, id string) error {
			_, err := e.WaitJob(ctx, id, job.ProgressToken(), time.Second)
			return err
		},
		"OpenJobResult": func(ctx context.Context, id string) error { _, err := e.OpenJobResult(ctx, id); return err },
		"ListTasks": func(ctx context.Context, id string) error {
			_, _, err := e.ListTasks(ctx, engine.ListTasksParams{JobID: id})
			return err
		},
		"CountFinishedTasks": func(ctx context.Context, id string) error {
			_, err := e.CountFinishedTasks(ctx, id, time.Now(), time.Second, 4)
			return err
		},
	}
	for name, call := range jobCalls {
		same(name, job.ID, "s0:j-none", call)
	}
	taskCalls := map[string]func(ctx context.Context, id string) error{
		"GetTask":  func(ctx context.Context, id string) error { _, err := e.GetTask(ctx, id); return err },
		"ListLogs": func(ctx context.Context, id string) error { _, err := e.ListLogs(ctx, id, 0, 10); return err },
		"FollowLogs": func(ctx context.Context, id string) error {
			return e.FollowLogs(ctx, id, false, func([]domain.LogLine) error { return nil })
		},
		"GetTree": func(ctx context.Context, id string) error { _, err := e.GetTree(ctx, id); return err },
	}
	for name, call := range taskCalls {
		for _, id := range []string{chunk.ID, treeRoot, ids["s0:a"]} {
			same(name, id, "s0:t-none", call)
		}
	}

	// bob's job from ada's upload: the upload does not exist for bob.
	if _, _, err := e.CreateJob(bob, js, ""); !errors.Is(err, domain.ErrNotFound) || !strings.Contains(err.Error(), "upload") {
		t.Errorf("bob's job from ada's upload = %v, want the upload not found", err)
	}
	// The same idempotency key is bob's own: a new job, not ada's.
	hosted := spec(1)
	bobs, created, err := e.CreateJob(bob, hosted, "key-1")
	if err != nil || !created || bobs.ID == job.ID || bobs.Owner != "bob" {
		t.Fatalf("bob's job with ada's key = %+v, created %v, %v; want a new job of bob's", bobs, created, err)
	}

	list := func(ctx context.Context, owner string) []string {
		t.Helper()
		jobs, _, err := e.ListJobs(ctx, engine.ListJobsParams{Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range jobs {
			out = append(out, j.Owner+"/"+j.ID)
		}
		return out
	}
	if got := list(bob, ""); len(got) != 1 || got[0] != "bob/"+bobs.ID {
		t.Errorf("bob's ListJobs = %v, want only bob's job", got)
	}
	if got := list(bob, "ada"); len(got) != 0 {
		t.Errorf("bob's ListJobs of ada's = %v, want none", got)
	}
	if got := list(root, ""); len(got) != 2 {
		t.Errorf("an admin's ListJobs = %v, want both jobs", got)
	}
	if got := list(root, "ada"); len(got) != 1 || got[0] != "ada/"+job.ID {
		t.Errorf("an admin's ListJobs of ada's = %v, want ada's job", got)
	}
	if roots, err := e.ListTreeRoots(bob, 10); err != nil || len(roots) != 0 {
		t.Errorf("bob's ListTreeRoots = %d roots, %v; want none", len(roots), err)
	}
	if roots, err := e.ListTreeRoots(root, 10); err != nil || len(roots) != 1 || roots[0].Owner != "ada" {
		t.Errorf("an admin's ListTreeRoots = %v, %v; want ada's tree", roots, err)
	}

	// Nothing bob did changed ada's job; an admin may act on it.
	if v, err := e.GetJob(ada, job.ID); err != nil || v.Status != domain.JobPending {
		t.Fatalf("ada's job after bob = %+v, %v; want it pending", v, err)
	}
	if v, err := e.CancelJob(root, job.ID); err != nil || v.Status != domain.JobCancelled {
		t.Fatalf("an admin's CancelJob of ada's job = %+v, %v", v, err)
	}
}

// TestTreeOwnerCrossesShards: the tasks of a tree that another shard
// creates are the submitter's there too, and another account cannot see
// them on that shard either.
func TestTreeOwnerCrossesShards(t *testing.T) {
	t.Parallel()
	mesh, _, _ := newMesh(t, "s0", "s1")
	ada := domain.WithCaller(t.Context(), domain.Caller{Account: "ada"})
	bob := domain.WithCaller(t.Context(), domain.Caller{Account: "bob"})
	ids, _, err := mesh["s0"].SubmitTree(ada, &domain.TreeSpec{Tasks: []domain.TreeTaskSpec{
		{ID: "s1:root", Workload: "sum", Args: []domain.TreeArg{ref("s0:a")}},
		{ID: "s0:a", Workload: "num", Args: []domain.TreeArg{arg("1")}},
	}}, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{ids["s1:root"], ids["s0:a"]} {
		e := mesh[strings.Split(id, ":")[0]]
		v, err := e.GetTask(ada, id)
		if err != nil || v.Owner != "ada" {
			t.Errorf("task %s for ada = %+v, %v; want ada's", id, v, err)
		}
		if _, err := e.GetTask(bob, id); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("task %s for bob = %v, want ErrNotFound", id, err)
		}
	}
}
