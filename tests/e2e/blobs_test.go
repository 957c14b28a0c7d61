package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/scimesh/scimesh/internal/blob"
	"github.com/scimesh/scimesh/internal/pgtest"
	"github.com/scimesh/scimesh/internal/s3test"
	"github.com/scimesh/scimesh/internal/testenv"
	"github.com/scimesh/scimesh/tests/framework/binary"
)

// bucketName is the bucket of a blob store URL s3://NAME?….
func bucketName(rawURL string) string {
	name, _, _ := strings.Cut(strings.TrimPrefix(rawURL, "s3://"), "?")
	return name
}

// objects lists the objects of a bucket but the blob store's marker.
func objects(t *testing.T, bucket string) []string {
	t.Helper()
	out, err := s3test.Client(t).ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		if k := aws.ToString(o.Key); k != blob.MarkerName {
			keys = append(keys, k)
		}
	}
	return keys
}

// filesUnder counts the regular files under dir.
func filesUnder(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// TestTwoReplicasShareABucket runs two coordinators on one PostgreSQL
// database, each with its own empty data directory and the same S3
// bucket: a table uploaded through one, its job created through the other,
// a worker on each. The job completes with the brute-force result, and
// neither data directory holds a file. Without --presign every chunk's
// bytes pass through a coordinator (scimesh_task_input_bytes_total adds up
// to them); with it, none do.
func TestTwoReplicasShareABucket(t *testing.T) {
	t.Parallel()
	for _, presign := range []bool{false, true} {
		t.Run(fmt.Sprintf("presign=%v", presign), func(t *testing.T) {
			t.Parallel()
			db, bucket := pgtest.URL(t), s3test.Bucket(t)
			env := append(append([]string{}, tokenEnv...), s3test.Env(t)...)
			var procs [2]*binary.Proc
			var dataDirs [2]string
			for i := range procs {
				dir := t.TempDir()
				dataDirs[i] = filepath.Join(dir, "data")
				args := []string{"--db", db, "--data-dir", dataDirs[i], "--blobs", bucket}
				if presign {
					args = append(args, "--presign")
				}
				procs[i] = serveProc(t, dir, env, args...)
				// Workers get no AWS credentials: with --presign the
				// URLs carry their own signatures.
				start(t, dir, workerEnv(procs[i].URL), "worker", "--id", fmt.Sprintf("w%d", i), "--concurrency", "2",
					"--work-dir", filepath.Join(dir, "work"), "--workload", copyWorkload(""))
			}
			dir := t.TempDir()
			table := filepath.Join(dir, "table.csv")
			want := writeScoredTable(t, table, 3000, 20)
			body, err := os.ReadFile(table)
			if err != nil {
				t.Fatal(err)
			}
			uploadID := uploadCSV(t, procs[0].URL, "ctok", string(body))
			if keys := objects(t, bucketName(bucket)); len(keys) != 1 {
				t.Fatalf("the bucket holds %v after the upload, want its one object", keys)
			}
			var j jobOut
			req := map[string]any{"workload": "copy", "top_k": 20, "chunk_rows": 250, "input": map[string]any{"upload_id": uploadID}}
			if s := call(t, "POST", procs[1].URL+"/jobs", "ctok", req, &j); s != 201 {
				t.Fatalf("create the job through the other coordinator: %d", s)
			}
			waitCompleted(t, procs[0].URL, j.JobID, time.Minute)
			got, err := runStdout(t, dir, clientEnv(procs[1].URL), "result", j.JobID)
			if err != nil || got != want {
				t.Fatalf("result: %v\n%s\nwant:\n%s", err, got, want)
			}
			for i, d := range dataDirs {
				if n := filesUnder(t, d); n != 0 {
					t.Errorf("coordinator %d's data directory holds %d files; with --blobs it should hold none", i, n)
				}
			}
			var served float64
			for _, p := range procs {
				v, ok := metricValue(scrapeMetrics(t, p.URL), "scimesh_task_input_bytes_total", nil)
				if !ok {
					t.Fatal("no scimesh_task_input_bytes_total")
				}
				served += v
			}
			// Every chunk repeats the header line: 12 chunks of the
			// table's rows.
			header := len("id,value\n")
			total := float64(len(body) + 11*header)
			switch {
			case presign && served != 0:
				t.Errorf("with --presign the coordinators served %v bytes of chunks, want 0", served)
			case !presign && served < total:
				t.Errorf("without --presign the coordinators served %v bytes of chunks, want at least the %v of the 12 chunks", served, total)
			}
		})
	}
}

// waitCompleted polls a job until it is completed, failing the test if it
// ends otherwise or takes longer than d.
func waitCompleted(t *testing.T, url, jobID string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var got jobOut
		call(t, "GET", url+"/jobs/"+jobID, "ctok", nil, &got)
		switch got.Status {
		case "completed":
			return
		case "failed", "cancelled":
			t.Fatalf("job %s is %s", jobID, got.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s after %v, want completed", jobID, got.Status, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestUploadToBucketKilledMidway kills a coordinator with SIGKILL while a
// table streams into its S3 bucket: nothing of it is ever an object or
// served, the coordinator comes back, the same upload sent again succeeds
// and its job completes; prune's sweep then aborts the upload the kill
// left unfinished.
func TestUploadToBucketKilledMidway(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bucket := s3test.Bucket(t)
	name := bucketName(bucket)
	env := append(append([]string{}, tokenEnv...), s3test.Env(t)...)
	db := "sqlite:" + filepath.Join(dir, "scimesh.db")
	addr := testenv.FreeAddr(t)
	args := []string{"--db", db, "--data-dir", filepath.Join(dir, "data"), "--blobs", bucket}
	p := serveOn(t, dir, addr, env, args...)

	// A table of about 64 MB, sent slowly enough that the kill lands
	// while it streams.
	const rows = 1_500_000
	pr, pw := io.Pipe()
	go func() {
		defer pw.Close()
		io.WriteString(pw, "id,value\n")
		var b strings.Builder
		for i := range rows {
			fmt.Fprintf(&b, "row-%08d,%d\n", i, i%977)
			if b.Len() > 1<<20 {
				if _, err := io.WriteString(pw, b.String()); err != nil {
					return
				}
				b.Reset()
				time.Sleep(20 * time.Millisecond)
			}
		}
		io.WriteString(pw, b.String())
	}()
	req, _ := http.NewRequest("POST", p.URL+"/upload", pr)
	req.Header.Set("Authorization", "Bearer ctok")
	uploadDone := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("the upload was answered %d before the kill", resp.StatusCode)
		}
		uploadDone <- err
	}()
	client := s3test.Client(t)
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := client.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Uploads) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no multipart upload began within 60 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	if err := <-uploadDone; err == nil || strings.Contains(err.Error(), "answered") {
		t.Fatalf("the upload cut by the kill: %v", err)
	}
	if keys := objects(t, name); len(keys) != 0 {
		t.Fatalf("after the kill the bucket holds %v, want nothing", keys)
	}

	p = serveOn(t, dir, addr, env, args...)
	var listed struct {
		Jobs []jobOut `json:"jobs"`
	}
	call(t, "GET", p.URL+"/jobs", "ctok", nil, &listed)
	if len(listed.Jobs) != 0 {
		t.Fatalf("jobs after the kill: %v", listed.Jobs)
	}
	table := filepath.Join(dir, "table.csv")
	want := writeScoredTable(t, table, 2000, 10)
	body, err := os.ReadFile(table)
	if err != nil {
		t.Fatal(err)
	}
	uploadID := uploadCSV(t, p.URL, "ctok", string(body))
	start(t, dir, workerEnv(p.URL), "worker", "--id", "w", "--work-dir", filepath.Join(dir, "work"), "--workload", copyWorkload(""))
	var j jobOut
	if s := call(t, "POST", p.URL+"/jobs", "ctok", map[string]any{"workload": "copy", "top_k": 10, "chunk_rows": 500,
		"input": map[string]any{"upload_id": uploadID}}, &j); s != 201 {
		t.Fatalf("create job: %d", s)
	}
	waitCompleted(t, p.URL, j.JobID, time.Minute)
	if got, err := runStdout(t, dir, clientEnv(p.URL), "result", j.JobID); err != nil || got != want {
		t.Fatalf("result after the retried upload: %v\n%s", err, got)
	}
	if keys := objects(t, name); len(keys) != 1 {
		t.Fatalf("the bucket holds %v, want the retried upload's one object", keys)
	}

	// The kill's unfinished multipart upload is a leftover the sweep
	// aborts once it is older than the grace period.
	time.Sleep(1100 * time.Millisecond)
	out, err := run(t, dir, env, "prune", "--db", db, "--blobs", bucket, "--older-than", "0", "--orphan-age", "1s")
	if err != nil {
		t.Fatalf("prune: %v\n%s", err, out)
	}
	left, err := client.ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Uploads) != 0 {
		t.Fatalf("prune left %d unfinished uploads:\n%s", len(left.Uploads), out)
	}
	if keys := objects(t, name); len(keys) != 1 {
		t.Fatalf("prune removed the upload a job uses: the bucket holds %v", keys)
	}
}
