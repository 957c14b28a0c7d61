package e2e

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/scimesh/scimesh/internal/pgtest"
	"github.com/scimesh/scimesh/internal/rpc"
	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
	"github.com/scimesh/scimesh/tests/framework/binary"
)

// stitchRow is one row of a chunk output, as the independent computation
// of a final CSV sees it.
type stitchRow struct {
	score      float64
	chunk, row int
	line       string
}

// stitchOutput is chunk c's output: rows rows of id,score with scores of
// 16 bits, so that ties across chunks and within them are common.
func stitchOutput(c, rows int) ([]byte, []stitchRow) {
	var b strings.Builder
	b.WriteString("id,score\n")
	kept := make([]stitchRow, rows)
	for r := range rows {
		v := uint64(c)*2654435761 + uint64(r)*40503 + 7
		v ^= v >> 15
		v *= 0x9E3779B97F4A7C15
		score := int(v >> 48)
		line := fmt.Sprintf("c%d-r%d,%d", c, r, score)
		b.WriteString(line + "\n")
		kept[r] = stitchRow{float64(score), c, r, line}
	}
	return []byte(b.String()), kept
}

// expectedStitch is the final CSV of rows, computed without the table
// package: every row sorted by score (highest first), then chunk index,
// then row order, the first topK kept.
func expectedStitch(rows []stitchRow, topK int) string {
	slices.SortFunc(rows, func(a, b stitchRow) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		if c := cmp.Compare(a.chunk, b.chunk); c != 0 {
			return c
		}
		return cmp.Compare(a.row, b.row)
	})
	var b strings.Builder
	b.WriteString("id,score\n")
	for _, r := range rows[:min(topK, len(rows))] {
		b.WriteString(r.line + "\n")
	}
	return b.String()
}

// TestStitchSurvivesKill runs two coordinators on one PostgreSQL database
// with a job of lease_seconds 5 and max_attempts 1 whose chunk outputs
// have 10,000 rows each, SIGKILLs the coordinator that started the stitch
// in the middle of its merge, and checks that the other one takes the
// stitch over once its lease runs out and completes the job with exactly
// the final CSV an independent computation gives. Query of the stitch
// task lists the job's chunk tasks as its upstreams.
func TestStitchSurvivesKill(t *testing.T) {
	t.Parallel()
	chunks, rows := 300, 10000
	if binary.Race {
		chunks = 120
	}
	db := pgtest.URL(t)
	dir := t.TempDir()
	env := append(tokenEnv, "PEER_AUTH_TOKEN=ptok")
	procs := []*binary.Proc{
		serveProc(t, dir, env, "--db", db, "--stitch-lease", "2s"),
		serveProc(t, dir, env, "--db", db, "--stitch-lease", "2s"),
	}
	a := procs[0]
	var j jobOut
	if s := call(t, "POST", a.URL+"/jobs", "ctok", map[string]any{"workload": "w", "top_k": rows, "lease_seconds": 5, "max_attempts": 1,
		"input": map[string]any{"chunks": chunkList(chunks)}}, &j); s != 201 {
		t.Fatalf("create job: %d", s)
	}

	// The outputs are made before anything is claimed, and a few are sent
	// at a time, so that a loaded machine does not let a lease of 5 s run
	// out between a claim and its results (max_attempts 1 would fail the
	// job).
	outputs := make([][]byte, chunks)
	var all []stitchRow
	for c := range chunks {
		out, kept := stitchOutput(c, rows)
		outputs[c] = out
		all = append(all, kept...)
	}
	for {
		var claimed struct{ Tasks []taskOut }
		s := call(t, "POST", a.URL+"/tasks/claim", "wtok", map[string]any{"worker_id": "w", "max_tasks": 5}, &claimed)
		if s == http.StatusNoContent {
			break
		}
		if s != 200 {
			t.Fatalf("claim: %d", s)
		}
		var items []map[string]any
		for _, tk := range claimed.Tasks {
			items = append(items, map[string]any{"task_id": tk.TaskID, "worker_id": "w", "attempt": tk.Attempt, "output": string(outputs[tk.ChunkIndex])})
		}
		var res struct{ Results []struct{ Status int } }
		if s := call(t, "POST", a.URL+"/tasks/results", "wtok", map[string]any{"results": items}, &res); s != 200 {
			t.Fatalf("results: %d", s)
		}
		for _, r := range res.Results {
			if r.Status != 200 {
				t.Fatalf("result item: %d", r.Status)
			}
		}
	}

	// Kill the coordinator whose stitcher took the job, as soon as it says so.
	var killed, other *binary.Proc
	deadline := time.Now().Add(30 * time.Second)
	for killed == nil {
		for i, p := range procs {
			if strings.Contains(p.Stderr.String(), `msg="stitch started"`) {
				if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				p.Wait()
				killed, other = p, procs[1-i]
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no coordinator started the stitch within 30 s")
		}
		time.Sleep(time.Millisecond)
	}
	var mid jobOut
	call(t, "GET", other.URL+"/jobs/"+j.JobID, "ctok", nil, &mid)
	if mid.Status != "running" {
		t.Fatalf("job is %s right after the kill; want running (the kill must land mid-stitch: make the outputs bigger)", mid.Status)
	}
	if strings.Contains(killed.Stderr.String(), "job completed") {
		t.Fatal("the killed coordinator completed the job before the kill")
	}

	want := expectedStitch(all, rows)
	deadline = time.Now().Add(60 * time.Second)
	for {
		var got struct {
			jobOut
			Error string
		}
		call(t, "GET", other.URL+"/jobs/"+j.JobID, "ctok", nil, &got)
		if got.Status == "completed" {
			break
		}
		if got.Status != "running" || time.Now().After(deadline) {
			t.Fatalf("job is %s (%q); want completed by the coordinator left", got.Status, got.Error)
		}
		time.Sleep(50 * time.Millisecond)
	}
	req, _ := http.NewRequest("GET", other.URL+"/jobs/"+j.JobID+"/result", nil)
	req.Header.Set("Authorization", "Bearer ctok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != want {
		t.Fatalf("final CSV (%d bytes) differs from the independent computation (%d bytes)", len(body), len(want))
	}

	// The stitch was taken again, not failed: a second attempt of the
	// coordinators', the job's max_attempts of 1 notwithstanding.
	root := j.JobID + "-root"
	q := scimeshv1connect.NewQueueClient(rpc.H2CClient(), other.URL, connect.WithGRPC(), withToken("ctok"))
	info, err := q.Query(t.Context(), connect.NewRequest(&v1.QueryRequest{TaskId: root}))
	if err != nil {
		t.Fatal(err)
	}
	if m := info.Msg; m.State != "completed" || m.Attempt != 2 {
		t.Errorf("stitch task is %s at attempt %d; want completed at attempt 2", m.State, m.Attempt)
	}
	if got := info.Header().Get("Scimesh-Upstream-Count"); got != strconv.Itoa(chunks) {
		t.Errorf("Scimesh-Upstream-Count = %q; want %d", got, chunks)
	}
	if ids := info.Msg.UpstreamIds; len(ids) != chunks || ids[0] != j.JobID+"-0" || ids[chunks-1] != fmt.Sprintf("%s-%d", j.JobID, chunks-1) {
		t.Errorf("stitch upstream_ids = %d IDs (%.3v…); want the job's %d chunk tasks", len(ids), ids, chunks)
	}
}

// TestQueryStitchUpstreams: Query of a job's stitch task lists the job's
// chunk tasks, exactly those GET /jobs/{id}/tasks lists, in chunk order,
// over gRPC and over the Connect protocol's JSON.
func TestQueryStitchUpstreams(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveProc(t, dir, append(tokenEnv, "PEER_AUTH_TOKEN=ptok"), "--db", "sqlite:"+dir+"/scimesh.db")
	var j jobOut
	if s := call(t, "POST", p.URL+"/jobs", "ctok", map[string]any{"workload": "w", "input": map[string]any{"chunks": chunkList(12)}}, &j); s != 201 {
		t.Fatalf("create job: %d", s)
	}
	var page struct{ Tasks []taskOut }
	call(t, "GET", p.URL+"/jobs/"+j.JobID+"/tasks?limit=100", "ctok", nil, &page)
	var want []string
	for _, tk := range page.Tasks {
		want = append(want, tk.TaskID)
	}
	if len(want) != 12 {
		t.Fatalf("the job lists %d tasks; want 12", len(want))
	}
	q := scimeshv1connect.NewQueueClient(rpc.H2CClient(), p.URL, connect.WithGRPC(), withToken("ctok"))
	info, err := q.Query(t.Context(), connect.NewRequest(&v1.QueryRequest{TaskId: j.JobID + "-root"}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(info.Msg.UpstreamIds, want) || info.Msg.State != "waiting" {
		t.Errorf("Query of the stitch task: %s with upstream_ids %v; want waiting with %v", info.Msg.State, info.Msg.UpstreamIds, want)
	}
	if got := info.Header().Get("Scimesh-Upstream-Count"); got != "12" {
		t.Errorf("Scimesh-Upstream-Count = %q; want 12", got)
	}
	var viaJSON struct {
		UpstreamIDs []string `json:"upstreamIds"`
	}
	if s := call(t, "POST", p.URL+"/scimesh.v1.Queue/Query", "ctok", map[string]any{"task_id": j.JobID + "-root"}, &viaJSON); s != 200 || !slices.Equal(viaJSON.UpstreamIDs, want) {
		t.Errorf("Connect JSON Query: %d with upstreamIds %v; want 200 with %v", s, viaJSON.UpstreamIDs, want)
	}
	// A chunk task has no upstreams, and no count.
	info, err = q.Query(t.Context(), connect.NewRequest(&v1.QueryRequest{TaskId: want[0]}))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Msg.UpstreamIds) != 0 || info.Header().Get("Scimesh-Upstream-Count") != "" || info.Msg.DownstreamId != j.JobID+"-root" {
		t.Errorf("Query of a chunk task: upstream_ids %v, count %q, downstream %q", info.Msg.UpstreamIds, info.Header().Get("Scimesh-Upstream-Count"), info.Msg.DownstreamId)
	}
}
