package engine_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/table"
)

// TestPeekJobResult: a running job's partial result is the merge of the
// chunks completed so far, the final CSV's order and format, and grows as
// chunks complete; a job with columns has them joined; a completed job
// says so; another account's job does not exist.
func TestPeekJobResult(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		e, _ := columnsEngine(t, s)
		if _, _, err := e.CreateAccount(ctx, domain.Account{Name: "ada"}); err != nil {
			t.Fatal(err)
		}
		ada := domain.WithCaller(ctx, domain.Caller{Account: "ada"})
		u, err := e.CreateUpload(ada, strings.NewReader(columnsInput), -1)
		if err != nil {
			t.Fatal(err)
		}
		sp := columnsSpec(u.ID, 2, "smiles")
		v, _, err := e.CreateJob(ada, sp, "")
		if err != nil {
			t.Fatal(err)
		}
		peek := func() *engine.PartialResult {
			t.Helper()
			p, err := e.PeekJobResult(ada, v.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		if p := peek(); len(p.CSV) != 0 || p.ChunksDone != 0 || p.ChunksTotal != 3 || p.Completed {
			t.Errorf("before any chunk: %q, %d of %d, completed %v; want nothing, 0 of 3", p.CSV, p.ChunksDone, p.ChunksTotal, p.Completed)
		}
		tasks, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w", Max: 3})
		if err != nil || len(tasks) != 3 {
			t.Fatalf("claim: %d tasks, %v", len(tasks), err)
		}
		outputs := map[int]string{0: "id,score\nx,0.5\ny,0.7\n", 1: "id,score\nz,0.9\n", 2: "id,score\nw,0.6\n"}
		var done []table.ChunkOutput
		for _, i := range []int{2, 0} {
			tk := tasks[i]
			if _, err := e.CompleteTask(ctx, engine.CompleteTaskParams{TaskID: tk.ID, WorkerID: "w", Attempt: 1, Output: []byte(outputs[tk.ChunkIndex])}); err != nil {
				t.Fatal(err)
			}
			done = append(done, table.ChunkOutput{Index: tk.ChunkIndex, Data: []byte(outputs[tk.ChunkIndex])})
			var plain bytes.Buffer
			if _, err := table.Merge(&plain, done, "score", domain.Desc, 2); err != nil {
				t.Fatal(err)
			}
			p := peek()
			if p.ChunksDone != len(done) || p.ChunksTotal != 3 {
				t.Errorf("after %d chunks: %d of %d done", len(done), p.ChunksDone, p.ChunksTotal)
			}
			if want := joinSmiles(t, plain.String()); string(p.CSV) != want {
				t.Errorf("after %d chunks: partial result\n%s\nwant\n%s", len(done), p.CSV, want)
			}
		}
		if _, err := e.PeekJobResult(domain.WithCaller(ctx, domain.Caller{Account: "bob"}), v.ID, 0); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("another account's peek: %v; want not found", err)
		}
		if _, err := e.CompleteTask(ctx, engine.CompleteTaskParams{TaskID: tasks[1].ID, WorkerID: "w", Attempt: 1, Output: []byte(outputs[1])}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.StitchReadyJobs(ctx); err != nil {
			t.Fatal(err)
		}
		if p := peek(); !p.Completed || p.CSV != nil || p.ChunksDone != 3 {
			t.Errorf("a completed job's peek: completed %v, %d bytes, %d done; want completed, no bytes, 3 done", p.Completed, len(p.CSV), p.ChunksDone)
		}
		// The best row alone, as a page shows the head of the result.
		head, err := e.PeekJobResult(ada, v.ID, 1)
		if err != nil {
			t.Fatal(err)
		}
		if want := "id,score,smiles\nz,0.9,O\n"; !head.Completed || string(head.CSV) != want {
			t.Errorf("the best row of the completed job: %q (completed %v); want %q", head.CSV, head.Completed, want)
		}
	})
}

// joinSmiles appends the smiles of columnsInput's rows to a final CSV of
// id,score whose ids are among x (chunk 0), y (chunk 0), z (chunk 1) and
// w (chunk 2).
func joinSmiles(t *testing.T, csv string) string {
	t.Helper()
	smiles := map[string]string{"x": "CCO", "y": "\"C\nC\"", "z": "O", "w": "C"}
	var b bytes.Buffer
	for i, line := range bytes.Split(bytes.TrimSuffix([]byte(csv), []byte("\n")), []byte("\n")) {
		if i == 0 {
			fmt.Fprintf(&b, "%s,smiles\n", line)
			continue
		}
		id, _, _ := bytes.Cut(line, []byte(","))
		fmt.Fprintf(&b, "%s,%s\n", line, smiles[string(id)])
	}
	return b.String()
}
