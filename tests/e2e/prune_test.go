package e2e

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/pgtest"
	"github.com/scimesh/scimesh/internal/store/migrate"
	"github.com/scimesh/scimesh/internal/store/storeopen"
	"github.com/scimesh/scimesh/tests/framework/binary"
)

// uploadCSV posts body to /upload and returns the upload's ID.
func uploadCSV(t *testing.T, url, token, body string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/upload", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "text/csv")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var u struct {
		UploadID string `json:"upload_id"`
	}
	if resp.StatusCode != 201 {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("upload: %d %s", resp.StatusCode, data)
	}
	if err := jsonDecode(resp.Body, &u); err != nil {
		t.Fatal(err)
	}
	return u.UploadID
}

// getStatus sends a GET and returns its status code.
func getStatus(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// runJob creates a job over upload uploadID (chunks of one row), runs
// every chunk with a log line, waits until it is completed, and returns
// its ID and its tasks' IDs.
func runJob(t *testing.T, p *binary.Proc, uploadID string) (string, []string) {
	t.Helper()
	jobID, tasks := workJob(t, p, uploadID)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var got jobOut
		call(t, "GET", p.URL+"/jobs/"+jobID, "ctok", nil, &got)
		if got.Status == "completed" {
			return jobID, tasks
		}
		if time.Now().After(deadline) {
			t.Fatalf("job is %s, want completed", got.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// workJob creates a job over uploadID and works every chunk of it to a
// result, without waiting for the stitch; it returns the job's and the
// tasks' IDs.
func workJob(t *testing.T, p *binary.Proc, uploadID string) (string, []string) {
	t.Helper()
	var j jobOut
	body := map[string]any{"workload": "w", "top_k": 1, "chunk_rows": 1, "input": map[string]any{"upload_id": uploadID}}
	if s := call(t, "POST", p.URL+"/jobs", "ctok", body, &j); s != 201 {
		t.Fatalf("create job: %d", s)
	}
	var tasks []string
	for {
		var tk taskOut
		s := call(t, "POST", p.URL+"/tasks/claim", "wtok", map[string]any{"worker_id": "w1", "workloads": []string{"w"}}, &tk)
		if s == 204 {
			break
		}
		if s != 200 {
			t.Fatalf("claim: %d", s)
		}
		tasks = append(tasks, tk.TaskID)
		lease := map[string]any{"worker_id": "w1", "attempt": tk.Attempt, "lines": []string{"working"}}
		if s := call(t, "POST", p.URL+"/tasks/"+tk.TaskID+"/logs", "wtok", lease, nil); s != 204 {
			t.Fatalf("logs: %d", s)
		}
		res := map[string]any{"worker_id": "w1", "attempt": tk.Attempt, "output": "id,score\na,1\n"}
		if s := call(t, "POST", p.URL+"/tasks/"+tk.TaskID+"/result", "wtok", res, nil); s != 200 {
			t.Fatalf("result: %d", s)
		}
	}
	return j.JobID, tasks
}

// TestPruneCommand runs `scimesh prune` beside a serving coordinator:
// --dry-run deletes nothing and says what it would; the real pass deletes
// the finished job and its upload, which are then 404 on every route, the
// old usage and audit entries, and records itself in the audit trail; it
// leaves a pending job alone.
func TestPruneCommand(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, pg bool) {
		dir := t.TempDir()
		db := newDB(t, dir, pg)
		data := filepath.Join(dir, "data")
		p := serveProc(t, dir, tokenEnv, "--db", db, "--data-dir", data, "--retention", "0", "--upload-retention", "0")
		up := uploadCSV(t, p.URL, "ctok", "id,x\na,1\nb,2\n")
		jobID, tasks := runJob(t, p, up)
		if len(tasks) != 2 {
			t.Fatalf("the job ran %d chunks, want 2", len(tasks))
		}
		var pending jobOut
		if s := call(t, "POST", p.URL+"/jobs", "ctok", map[string]any{"workload": "other", "input": map[string]any{"chunks": chunkList(1)}}, &pending); s != 201 {
			t.Fatalf("create the pending job: %d", s)
		}
		files := func() int {
			entries, err := os.ReadDir(filepath.Join(data, "blobs", "files"))
			if err != nil {
				t.Fatal(err)
			}
			return len(entries)
		}
		if n := files(); n != 1 {
			t.Fatalf("%d files in the data directory, want the upload's", n)
		}
		time.Sleep(5 * time.Millisecond) // older than --older-than 1ms
		args := []string{"prune", "--db", db, "--data-dir", data, "--older-than", "1ms", "--upload-retention", "1ms"}
		out, err := run(t, dir, nil, append(args, "--dry-run")...)
		if err != nil {
			t.Fatalf("prune --dry-run: %v\n%s", err, out)
		}
		for _, want := range []string{"would delete 1 jobs and 0 trees", "would delete 1 uploads", "dry run: nothing was deleted"} {
			if !strings.Contains(out, want) {
				t.Errorf("prune --dry-run printed no %q:\n%s", want, out)
			}
		}
		if s := getStatus(t, p.URL+"/jobs/"+jobID, "ctok"); s != 200 {
			t.Fatalf("after a dry run, GET /jobs/%s = %d, want 200", jobID, s)
		}
		if s := getStatus(t, p.URL+"/tasks/"+tasks[0]+"/logs", "ctok"); s != 200 {
			t.Fatalf("after a dry run, the task's log = %d, want 200", s)
		}
		if n := files(); n != 1 {
			t.Fatalf("a dry run removed the upload's file (%d files left)", n)
		}

		out, err = run(t, dir, nil, args...)
		if err != nil {
			t.Fatalf("prune: %v\n%s", err, out)
		}
		for _, want := range []string{"deleted 1 jobs and 0 trees", "deleted 3 tasks, 2 log lines", "deleted 1 uploads"} {
			if !strings.Contains(out, want) {
				t.Errorf("prune printed no %q:\n%s", want, out)
			}
		}
		// The two attempts' usage (one row, or two across an hour's end),
		// and the trail of the upload and the two jobs.
		if !regexp.MustCompile(`deleted [12] rows of usage and 3 audit entries`).MatchString(out) {
			t.Errorf("prune printed no deleted usage and audit entries:\n%s", out)
		}
		var trail struct {
			Entries []struct{ Account, Action, Target string }
		}
		call(t, "GET", p.URL+"/audit", "ctok", nil, &trail)
		if len(trail.Entries) != 3 || trail.Entries[0].Action != "prune" || trail.Entries[0].Account != "" {
			t.Errorf("the audit trail after prune: %+v; want the pass's prune, job.delete and upload.delete, by \"\"", trail.Entries)
		}
		for _, path := range []string{"/jobs/" + jobID, "/jobs/" + jobID + "/tasks", "/jobs/" + jobID + "/result",
			"/tasks/" + tasks[0], "/tasks/" + tasks[0] + "/logs", "/ui/jobs/" + jobID} {
			if s := getStatus(t, p.URL+path, "ctok"); s != 404 {
				t.Errorf("GET %s after prune = %d, want 404", path, s)
			}
		}
		if n := files(); n != 0 {
			t.Errorf("%d files left after prune, want the upload's removed", n)
		}
		if s := getStatus(t, p.URL+"/jobs/"+pending.JobID, "ctok"); s != 200 {
			t.Errorf("the pending job after prune = %d, want 200", s)
		}
		var j struct {
			UploadID string `json:"upload_id"`
		}
		body := map[string]any{"workload": "w", "input": map[string]any{"upload_id": up}}
		if s := call(t, "POST", p.URL+"/jobs", "ctok", body, &j); s != 404 {
			t.Errorf("a job over the deleted upload = %d, want 404", s)
		}
		out, err = run(t, dir, nil, "prune", "--db", db, "--data-dir", data, "--older-than", "soon")
		if err == nil || !strings.Contains(out, "--older-than") || !strings.Contains(out, "720h") {
			t.Errorf("prune with a bad duration: %v\n%s", err, out)
		}
	})
}

// TestServeRetentionLoop: serve's own loop deletes a finished job once
// past --retention, and /metrics counts what it deleted.
func TestServeRetentionLoop(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveProc(t, dir, tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "scimesh.db"), "--data-dir", filepath.Join(dir, "data"),
		"--retention", "1ms", "--retention-interval", "100ms")
	up := uploadCSV(t, p.URL, "ctok", "id,x\na,1\n")
	// Not runJob: with --retention 1ms the job may be gone before a
	// poll sees it completed.
	jobID, _ := workJob(t, p, up)
	deadline := time.Now().Add(20 * time.Second)
	for getStatus(t, p.URL+"/jobs/"+jobID, "ctok") != 404 {
		if time.Now().After(deadline) {
			t.Fatal("the retention loop did not delete a job finished past --retention")
		}
		time.Sleep(50 * time.Millisecond)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(p.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := string(data)
		if strings.Contains(m, `scimesh_retention_deleted_total{kind="job"} 1`) && strings.Contains(m, `scimesh_retention_deleted_total{kind="task"} 2`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics does not count the deleted job and its 2 tasks:\n%s", grepLines(m, "scimesh_retention"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// ageFiles sets the times of the files at paths an hour and a minute
// back, older than prune's default --orphan-age.
func ageFiles(t *testing.T, paths ...string) {
	t.Helper()
	old := time.Now().Add(-time.Hour - time.Minute)
	for _, p := range paths {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
}

// migratedSQLite makes a SciMesh database at path with `scimesh migrate up`.
func migratedSQLite(t *testing.T, dir, path string) string {
	t.Helper()
	db := "sqlite:" + path
	if out, err := run(t, dir, nil, "migrate", "up", "--db", db); err != nil {
		t.Fatalf("migrate up: %v\n%s", err, out)
	}
	return db
}

// TestPruneLeavesForeignFilesAlone: files of another application named
// latest and checkpoint-7 beside the blobs, an hour old, survive `scimesh
// prune`, which removes SciMesh's own orphan and leftover as old.
func TestPruneLeavesForeignFilesAlone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := migratedSQLite(t, dir, filepath.Join(dir, "scimesh.db"))
	data := filepath.Join(dir, "data")
	blobs := filepath.Join(data, "blobs")
	for _, d := range []string{"files", "tmp"} {
		if err := os.MkdirAll(filepath.Join(blobs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var foreign []string
	for _, name := range []string{"latest", "checkpoint-7"} {
		for _, d := range []string{"", "files", "tmp"} {
			foreign = append(foreign, filepath.Join(blobs, d, name))
		}
	}
	own := []string{filepath.Join(blobs, "files", "u-0000000000000000000000aa"), filepath.Join(blobs, "tmp", "blob-123456")}
	for _, p := range append(append([]string{}, foreign...), own...) {
		if err := os.WriteFile(p, []byte("abcd"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ageFiles(t, append(append([]string{}, foreign...), own...)...)
	out, err := run(t, dir, nil, "prune", "--db", db, "--data-dir", data)
	if err != nil {
		t.Fatalf("prune: %v\n%s", err, out)
	}
	if !strings.Contains(out, "deleted 2 files that no row names") {
		t.Errorf("prune printed no \"deleted 2 files that no row names\":\n%s", out)
	}
	for _, p := range foreign {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("the other application's file after prune: %v", err)
		}
	}
	for _, p := range own {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("SciMesh's orphan %s after prune: %v, want it removed", p, err)
		}
	}
}

// TestPruneRefusesAnotherDatabasesBlobs: two SQLite databases share one
// data directory. The first serves, and its upload binds the blob store
// to it; `scimesh prune` of the second fails, saying whose store it is
// and what to do, and deletes nothing, the first's upload (an hour old,
// and named by none of the second's rows) included; prune of the first
// goes on.
func TestPruneRefusesAnotherDatabasesBlobs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	first := "sqlite:" + filepath.Join(dir, "first.db")
	p := serveProc(t, dir, tokenEnv, "--db", first, "--data-dir", data)
	uploadCSV(t, p.URL, "ctok", "id,x\na,1\n")
	files, err := filepath.Glob(filepath.Join(data, "blobs", "files", "u-*"))
	if err != nil || len(files) != 1 {
		t.Fatalf("the upload's file: %v, %v", files, err)
	}
	ageFiles(t, files[0])
	second := migratedSQLite(t, dir, filepath.Join(dir, "second.db"))

	out, err := run(t, dir, nil, "prune", "--db", second, "--data-dir", data)
	if err == nil {
		t.Fatalf("prune of the second database succeeded:\n%s", out)
	}
	for _, want := range []string{"belongs to another SciMesh database", "--blobs", "remove the marker", "nothing was deleted"} {
		if !strings.Contains(out, want) {
			t.Errorf("prune of the second database does not say %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(files[0]); err != nil {
		t.Fatalf("the first database's upload after prune of the second: %v", err)
	}
	if out, err := run(t, dir, nil, "prune", "--db", first, "--data-dir", data); err != nil || !strings.Contains(out, "deleted 0 files") {
		t.Errorf("prune of the first database: %v\n%s", err, out)
	}
}

// TestPruneRefusesAMissingDatabase: `scimesh prune` of a SQLite file that
// does not exist fails, saying so, and makes neither the file, nor its
// directory, nor the data directory; nor does it of a PostgreSQL
// database without SciMesh's schema, which it leaves without one.
func TestPruneRefusesAMissingDatabase(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, pg bool) {
		dir := t.TempDir()
		db := "sqlite:" + filepath.Join(dir, "nowhere", "x.db")
		if pg {
			db = pgtest.URL(t)
			sc, err := storeopen.OpenSchema(t.Context(), db)
			if err != nil {
				t.Fatal(err)
			}
			defer sc.Close()
			for {
				v, err := migrate.Down(t.Context(), sc.DB, sc.Migrations)
				if err != nil {
					t.Fatal(err)
				}
				if v == 0 {
					break
				}
			}
		}
		out, err := run(t, dir, nil, "prune", "--db", db)
		if err == nil {
			t.Fatalf("prune of a missing database succeeded:\n%s", out)
		}
		want := "no SciMesh database"
		if pg {
			want = "migrate up"
		}
		for _, w := range []string{"prune works on an existing database", want} {
			if !strings.Contains(out, w) {
				t.Errorf("prune of a missing database does not say %q:\n%s", w, out)
			}
		}
		if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
			t.Errorf("prune of a missing database made %v (%v), want nothing", entries, err)
		}
		if pg {
			if st, err := storeopen.OpenSchema(t.Context(), db); err != nil {
				t.Error(err)
			} else {
				if ms, err := migrate.Status(t.Context(), st.DB, st.Migrations); err != nil || slices.ContainsFunc(ms, func(m migrate.State) bool { return m.Applied }) {
					t.Errorf("after prune of a database without the schema: %+v, %v; want no migration applied", ms, err)
				}
				st.Close()
			}
		}
	})
}
