package engine_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/engine/enginetest"
	"github.com/scimesh/scimesh/internal/table"
)

// completeChunks creates a job of n chunks with lease_seconds 5 and
// max_attempts 1 on e, and records output(i) for chunk i. It returns the
// job's ID and the final CSV that the chunk outputs must give (nil when
// they cannot be merged).
func completeChunks(t *testing.T, e *engine.Engine, n, topK int, output func(i int) []byte) (string, []byte) {
	t.Helper()
	sp := spec(n)
	sp.TopK, sp.LeaseSeconds, sp.MaxAttempts = topK, 5, 1
	v, _, err := e.CreateJob(t.Context(), sp, "")
	if err != nil {
		t.Fatal(err)
	}
	var outs []table.ChunkOutput
	for {
		tasks, err := e.ClaimTasks(t.Context(), engine.ClaimTasksParams{WorkerID: "w", Max: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) == 0 {
			break
		}
		for _, tk := range tasks {
			out := output(tk.ChunkIndex)
			outs = append(outs, table.ChunkOutput{Index: tk.ChunkIndex, Data: out})
			if _, err := e.CompleteTask(t.Context(), engine.CompleteTaskParams{TaskID: tk.ID, WorkerID: "w", Attempt: tk.Attempt, Output: out}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var want bytes.Buffer
	if _, err := table.Merge(&want, outs, "score", domain.Desc, topK); err != nil {
		return v.ID, nil // outputs that cannot be merged
	}
	return v.ID, want.Bytes()
}

func smallOutput(i int) []byte {
	return fmt.Appendf(nil, "id,score\n%d-a,%d\n%d-b,%d\n", i, i%7, i, (i*5)%11)
}

// checkCompleted checks that job id completed with the final CSV want and
// that its stitch task completed at attempt wantAttempt.
func checkCompleted(t *testing.T, e *engine.Engine, id string, want []byte, wantAttempt int) {
	t.Helper()
	v, err := e.GetJob(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != domain.JobCompleted {
		t.Fatalf("job is %s (%q); want completed", v.Status, v.Error)
	}
	got := readResult(t, e, id)
	if sum := sha256.Sum256(got); v.ResultSHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("result_sha256 %s, want %x", v.ResultSHA256, sum)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("final CSV =\n%s\nwant\n%s", got, want)
	}
	root, err := e.GetTask(t.Context(), v.RootTaskID)
	if err != nil {
		t.Fatal(err)
	}
	if root.State != domain.TaskCompleted || root.Attempt != wantAttempt {
		t.Errorf("stitch task is %s at attempt %d; want completed at attempt %d", root.State, root.Attempt, wantAttempt)
	}
}

// TestStitchLeaseExpiresMidMerge: a coordinator whose stitch lease runs
// out in the middle of the merge (a pause longer than the lease) loses the
// stitch to another, which completes the job — the job's max_attempts of 1
// and lease_seconds of 5 notwithstanding — and the first one's late
// write changes nothing.
func TestStitchLeaseExpiresMidMerge(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	c := enginetest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	a := newEngine(s, engine.Config{NodeID: "a", Now: c.Now})
	b := newEngine(s, engine.Config{NodeID: "b", Now: c.Now})
	id, want := completeChunks(t, a, 40, 5, smallOutput)
	a.SetStitchPageBytes(1) // a page per output

	tookOver := false
	a.SetStitchPageHook(func(jobID string, page int) {
		if page != 2 || tookOver {
			return
		}
		tookOver = true
		c.Advance(engine.DefaultStitchLease + time.Second)
		if n, err := b.ExpireLeases(t.Context()); err != nil || n != 1 {
			t.Errorf("ExpireLeases after a's stitch lease ran out = %d, %v; want 1", n, err)
		}
		v, err := b.GetJob(t.Context(), jobID)
		if err != nil {
			t.Error(err)
		} else if v.Status.Final() {
			t.Errorf("job is %s (%q) once the stitch lease ran out; want it still running", v.Status, v.Error)
		}
		if n, err := b.StitchReadyJobs(t.Context()); err != nil || n != 1 {
			t.Errorf("b.StitchReady = %d, %v; want the job stitched", n, err)
		}
	})
	if n, err := a.StitchReadyJobs(t.Context()); err != nil || n != 0 {
		t.Errorf("a.StitchReady = %d, %v; want 0 (its lease was lost), no error", n, err)
	}
	if !tookOver {
		t.Fatal("the stitch hook never ran")
	}
	checkCompleted(t, a, id, want, 2)
}

// TestStitchLeaseRenewedWhileMerging: a merge that outlasts the stitch
// lease keeps it (renewed every third of it), so no other coordinator
// takes the stitch over; the job completes at the first attempt.
func TestStitchLeaseRenewedWhileMerging(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	c := enginetest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	const lease = 300 * time.Millisecond
	a := newEngine(s, engine.Config{NodeID: "a", Now: c.Now, StitchLease: lease})
	b := newEngine(s, engine.Config{NodeID: "b", Now: c.Now, StitchLease: lease})
	id, want := completeChunks(t, a, 10, 3, smallOutput)
	root := id + "-root"

	a.SetStitchPageHook(func(string, int) {
		// Twice the lease passes on the engines' clock, a third of it at a
		// time; each time, wait (in real time) for a renewal.
		for range 6 {
			c.Advance(lease / 3)
			deadline := time.Now().Add(10 * time.Second)
			for {
				v, err := b.GetTask(t.Context(), root)
				if err != nil {
					t.Error(err)
					return
				}
				if v.LeaseExpiresAt.Sub(c.Now()) > lease/2 {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("stitch lease expires at %v, %v from now; not renewed", v.LeaseExpiresAt, v.LeaseExpiresAt.Sub(c.Now()))
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			if n, err := b.ExpireLeases(t.Context()); err != nil || n != 0 {
				t.Errorf("ExpireLeases during a renewed stitch = %d, %v; want 0", n, err)
			}
		}
	})
	if n, err := a.StitchReadyJobs(t.Context()); err != nil || n != 1 {
		t.Fatalf("StitchReady = %d, %v; want 1", n, err)
	}
	checkCompleted(t, a, id, want, 1)
}

// TestStitchStopsWhenJobCancelled: a renewal that finds the job over stops
// the merge; nothing is written.
func TestStitchStopsWhenJobCancelled(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	a := newEngine(s, engine.Config{NodeID: "a", StitchLease: 90 * time.Millisecond})
	id, _ := completeChunks(t, a, 30, 3, smallOutput)
	a.SetStitchPageBytes(1)
	pages := 0
	a.SetStitchPageHook(func(jobID string, page int) {
		pages++
		if page == 0 {
			if _, err := a.CancelJob(t.Context(), jobID); err != nil {
				t.Error(err)
			}
			time.Sleep(200 * time.Millisecond) // renewals every 30 ms notice
		}
	})
	if n, err := a.StitchReadyJobs(t.Context()); err != nil || n != 0 {
		t.Errorf("StitchReady on a cancelled job = %d, %v; want 0, nil", n, err)
	}
	if pages != 1 {
		t.Errorf("the merge read %d pages after the job was cancelled; want it stopped after the first", pages)
	}
	v, err := a.GetJob(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != domain.JobCancelled {
		t.Errorf("job is %s; want cancelled", v.Status)
	}
}

// TestStitchInvalidOutputsFailJob: outputs that cannot be merged (here,
// two headers) fail the job with an error that says why; that is the only
// way a stitch fails a job.
func TestStitchInvalidOutputsFailJob(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	a := newEngine(s, engine.Config{NodeID: "a"})
	id, _ := completeChunks(t, a, 3, 3, func(i int) []byte {
		if i == 2 {
			return []byte("name,score\nx,1\n")
		}
		return smallOutput(i)
	})
	if n, err := a.StitchReadyJobs(t.Context()); err != nil || n != 1 {
		t.Fatalf("StitchReady = %d, %v; want 1 job failed", n, err)
	}
	v, err := a.GetJob(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != domain.JobFailed || !strings.Contains(v.Error, "failed: the chunk outputs cannot be merged into the final CSV: chunk 2 output header differs") ||
		!strings.Contains(v.Error, "all chunk outputs must have the same header") {
		t.Errorf("job is %s with error %q; want failed, saying chunk 2's header differs", v.Status, v.Error)
	}
}
