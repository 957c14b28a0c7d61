package engine_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/blob"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/table"
)

// columnsInput is a table of six molecules, with quoted fields, cut into
// chunks of two rows: ids x and y repeat across chunks with other values.
const columnsInput = "id,fp,smiles,name\r\n" +
	"x,00,CCO,\"ethanol, absolute\"\r\n" +
	"y,01,\"C\nC\",ethane\r\n" +
	"x,02,N,\"say \"\"ammonia\"\"\"\r\n" +
	"z,03,O,water\r\n" +
	"y,04,CCC,propane\r\n" +
	"w,05,C,methane\r\n"

// columnsEngine returns an engine on s with blobs in a directory, and an
// upload of columnsInput.
func columnsEngine(t *testing.T, s store.Store) (*engine.Engine, string) {
	t.Helper()
	blobs, err := blob.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(s, engine.Config{Blobs: blobs})
	u, err := e.CreateUpload(t.Context(), strings.NewReader(columnsInput), -1)
	if err != nil {
		t.Fatal(err)
	}
	return e, u.ID
}

func columnsSpec(upload string, topK int, columns ...string) *domain.JobSpec {
	sp := spec(0)
	sp.Chunks, sp.UploadID, sp.ChunkRows, sp.TopK, sp.MaxAttempts = nil, upload, 2, topK, 1
	if len(columns) > 0 {
		sp.Columns, sp.IDColumn = columns, domain.DefaultIDColumn
	}
	return sp
}

// runChunks claims every chunk of the engine's jobs as the pool and
// records output(chunk index) for it, then stitches. It returns the
// completion of each chunk, by index.
func runChunks(t *testing.T, e *engine.Engine, output func(i int) string) map[int]*engine.TaskView {
	t.Helper()
	done := map[int]*engine.TaskView{}
	for {
		tasks, err := e.ClaimTasks(t.Context(), engine.ClaimTasksParams{WorkerID: "w", Max: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) == 0 {
			break
		}
		for _, tk := range tasks {
			v, err := e.CompleteTask(t.Context(), engine.CompleteTaskParams{
				TaskID: tk.ID, WorkerID: "w", Attempt: tk.Attempt, Output: []byte(output(tk.ChunkIndex)),
			})
			if err != nil {
				t.Fatalf("complete chunk %d: %v", tk.ChunkIndex, err)
			}
			done[tk.ChunkIndex] = v
		}
	}
	if _, err := e.StitchReadyJobs(t.Context()); err != nil {
		t.Fatal(err)
	}
	return done
}

// TestColumnsJoined: a job with columns ends with the final CSV of the
// same job without them, each row followed by the asked columns of its
// own chunk's input row (ids repeat across chunks), quoted fields kept.
func TestColumnsJoined(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		e, upload := columnsEngine(t, s)
		outputs := map[int]string{
			0: "id,score\nx,0.9\ny,0.2\n",
			1: "id,score\nx,0.8\nz,0.1\n",
			2: "id,score\ny,0.85\nw,0.3\n",
		}
		plain, _, err := e.CreateJob(t.Context(), columnsSpec(upload, 4), "")
		if err != nil {
			t.Fatal(err)
		}
		joined, _, err := e.CreateJob(t.Context(), columnsSpec(upload, 4, "name", "smiles"), "")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(joined.Columns, []string{"name", "smiles"}) || joined.IDColumn != "id" {
			t.Errorf("the job joins %q by %q; want [name smiles] by id", joined.Columns, joined.IDColumn)
		}
		runChunks(t, e, func(i int) string { return outputs[i] })

		var want bytes.Buffer
		chunks := []table.ChunkOutput{{Index: 0, Data: []byte(outputs[0])}, {Index: 1, Data: []byte(outputs[1])}, {Index: 2, Data: []byte(outputs[2])}}
		if _, err := table.Merge(&want, chunks, "score", domain.Desc, 4); err != nil {
			t.Fatal(err)
		}
		checkCompleted(t, e, plain.ID, want.Bytes(), 1)
		checkCompleted(t, e, joined.ID, []byte("id,score,name,smiles\n"+
			"x,0.9,\"ethanol, absolute\",CCO\n"+
			"y,0.85,propane,CCC\n"+
			"x,0.8,\"say \"\"ammonia\"\"\",N\n"+
			"w,0.3,methane,C\n"), 1)
	})
}

// TestColumnsBadIDsFailTask: a result naming an id its chunk's input does
// not have, or an id on two rows that differ in an asked column, fails its
// task for good with an error naming the id, and so its job; a result
// without the id column is refused and the lease stays, as does one from
// a worker that does not hold the lease.
func TestColumnsBadIDsFailTask(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	e, _ := columnsEngine(t, s)
	dup, err := e.CreateUpload(t.Context(), strings.NewReader("id,smiles\nd,N\nd,O\n"), -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, output, wantErr string
	}{
		{"a missing id", "id,score\nq,0.5\n", `output id "q" is not in the input's column "id"`},
		{"a duplicate that differs", "id,score\nd,1\n", `id "d" is on two input rows with different "smiles"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j, _, err := e.CreateJob(t.Context(), columnsSpec(dup.ID, 5, "smiles"), "")
			if err != nil {
				t.Fatal(err)
			}
			tasks, err := e.ClaimTasks(t.Context(), engine.ClaimTasksParams{WorkerID: "w", Max: 1})
			if err != nil || len(tasks) != 1 {
				t.Fatalf("claim: %v, %v", tasks, err)
			}
			p := engine.CompleteTaskParams{TaskID: tasks[0].ID, WorkerID: "w", Attempt: 1, Output: []byte("score\n1\n")}
			if _, err := e.CompleteTask(t.Context(), p); !errors.Is(err, domain.ErrInvalidArgument) || !strings.Contains(err.Error(), `no column "id"`) {
				t.Fatalf("a result without the id column: %v; want it refused naming the column", err)
			}
			p.Output = []byte(tt.output)
			intruder := p
			intruder.WorkerID = "intruder"
			if _, err := e.CompleteTask(t.Context(), intruder); !errors.Is(err, domain.ErrLeaseLost) {
				t.Fatalf("the same result from a worker without the lease: %v; want lease lost", err)
			}
			v, err := e.CompleteTask(t.Context(), p)
			if err != nil {
				t.Fatal(err)
			}
			if v.State != domain.TaskFailed || !strings.Contains(v.Error, tt.wantErr) {
				t.Errorf("task is %s (%q); want failed with %q", v.State, v.Error, tt.wantErr)
			}
			got, err := e.GetJob(t.Context(), j.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != domain.JobFailed {
				t.Errorf("job is %s; want failed", got.Status)
			}
		})
	}
}

// TestColumnsRefused: columns that cannot be joined are refused when the
// job is created, and no job is made.
func TestColumnsRefused(t *testing.T) {
	t.Parallel()
	e, upload := columnsEngine(t, openStore(t))
	hosted := spec(1)
	hosted.Columns, hosted.IDColumn = []string{"smiles"}, "id"
	noHeader := columnsSpec(upload, 1, "smiles")
	noHeader.HasHeader = false
	otherID := columnsSpec(upload, 1, "smiles")
	otherID.IDColumn = "mol"
	many := columnsSpec(upload, 1)
	for i := range domain.MaxColumns + 1 {
		many.Columns = append(many.Columns, fmt.Sprint("c", i))
	}
	many.IDColumn = "id"
	for _, tt := range []struct {
		name    string
		spec    *domain.JobSpec
		wantErr string
	}{
		{"an unknown column", columnsSpec(upload, 1, "smiles", "mass"), `no column "mass"`},
		{"an unknown id column", otherID, `no column "mol"`},
		{"the score column", columnsSpec(upload, 1, "score"), `the score column "score"`},
		{"the id column", columnsSpec(upload, 1, "id"), `the id column "id"`},
		{"a name twice", columnsSpec(upload, 1, "name", "name"), `names "name" twice`},
		{"too many", many, "at most 32"},
		{"hosted chunks", hosted, "columns needs input.upload_id"},
		{"no header", noHeader, "needs has_header true"},
	} {
		if _, _, err := e.CreateJob(t.Context(), tt.spec, ""); !errors.Is(err, domain.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: %v; want an invalid argument with %q", tt.name, err, tt.wantErr)
		}
	}
	if jobs, _, err := e.ListJobs(t.Context(), engine.ListJobsParams{}); err != nil || len(jobs) != 0 {
		t.Errorf("refused jobs left %d jobs (%v)", len(jobs), err)
	}
}
