package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/blob"
)

type uploadOut struct {
	UploadID string `json:"upload_id"`
	Bytes    int64  `json:"bytes"`
	SHA256   string `json:"sha256"`
	Rows     int64  `json:"rows"`
}

func (b *bundle) upload(body string) uploadOut {
	b.t.Helper()
	var u uploadOut
	b.mustStatus(b.client("POST", "/upload", body), http.StatusCreated).decode(b.t, &u)
	return u
}

// download GETs a worker URL and returns the body and the sha256 header.
func (b *bundle) download(url string) (int, []byte, http.Header) {
	b.t.Helper()
	if strings.HasPrefix(url, "/") { // relative to the coordinator, as input.url is
		url = b.url + url
	}
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+b.tokens.Worker)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data, resp.Header
}

func TestUploadChunksAndInput(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens})
	// A BOM, CRLF line ends, quoted commas, quotes and newlines, an empty
	// line, needless quotes and no final newline.
	raw := "\ufeffid,\"smiles\"\r\n" +
		"m1,\"C,C\"\r\n" +
		"m2,\"say \"\"hi\"\"\"\r\n" +
		"\r\n" +
		"m3,\"two\nlines\"\r\n" +
		"\"m4\",CCO\r\n" +
		"m5,N"
	u := b.upload(raw)
	sum := sha256.Sum256([]byte(raw))
	if u.Bytes != int64(len(raw)) || u.SHA256 != hex.EncodeToString(sum[:]) || u.Rows != 6 || !strings.HasPrefix(u.UploadID, "s0:") {
		t.Fatalf("upload answered %+v; want %d bytes, the body's sha256 and 6 rows", u, len(raw))
	}
	j := b.createJob(0, map[string]any{"input": map[string]any{"upload_id": u.UploadID}, "chunk_rows": 2, "top_k": 1})
	if j.Tasks.Total != 3 {
		t.Fatalf("5 rows in chunks of 2 made %d tasks, want 3", j.Tasks.Total)
	}
	wantChunks := []string{
		"id,smiles\nm1,\"C,C\"\nm2,\"say \"\"hi\"\"\"\n",
		"id,smiles\nm3,\"two\nlines\"\nm4,CCO\n",
		"id,smiles\nm5,N\n",
	}
	for i, want := range wantChunks {
		tk, ok := b.claim("w", nil)
		if !ok || tk.ChunkIndex != i {
			t.Fatalf("claim %d: %+v", i, tk)
		}
		if wantURL := "/tasks/" + tk.TaskID + "/input"; tk.Input.URL != wantURL {
			t.Fatalf("input.url %q, want %q", tk.Input.URL, wantURL)
		}
		status, data, h := b.download(tk.Input.URL)
		if status != 200 || string(data) != want {
			t.Fatalf("chunk %d: %d %q, want %q", i, status, data, want)
		}
		got := sha256.Sum256(data)
		if hex.EncodeToString(got[:]) != tk.Input.SHA256 || h.Get("X-Content-SHA256") != tk.Input.SHA256 || tk.Input.Bytes != int64(len(data)) {
			t.Fatalf("chunk %d: sha256 %s / header %s / claimed %s, bytes %d / claimed %d",
				i, hex.EncodeToString(got[:]), h.Get("X-Content-SHA256"), tk.Input.SHA256, len(data), tk.Input.Bytes)
		}
		recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
		if err != nil || len(recs) != 1+min(2, 5-2*i) {
			t.Fatalf("chunk %d does not read back as a header and its rows: %v %v", i, recs, err)
		}
	}
	// Workers only: the client token may not download.
	req, _ := http.NewRequest("GET", b.url+"/tasks/"+j.JobID+"-0/input", nil)
	req.Header.Set("Authorization", "Bearer "+tokens.Client)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("input with the client token: %d, want 403", resp.StatusCode)
	}
}

// openCounter counts the blob reads an engine opens.
type openCounter struct {
	blob.Store
	opens atomic.Int64
}

func (c *openCounter) OpenRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	c.opens.Add(1)
	return c.Store.OpenRange(ctx, key, offset, length)
}

// A HEAD of a task's input says its size and sha256 as the GET does,
// from the task's record: it sends no body and reads nothing of the blob
// store (with a bucket, a read is a GET of the range).
func TestTaskInputHead(t *testing.T) {
	t.Parallel()
	blobs := &openCounter{}
	b := setup(t, options{tokens: tokens, wrapBlobs: func(s blob.Store) blob.Store { blobs.Store = s; return blobs }})
	u := b.upload("id,smiles\nm1,C\nm2,CC\nm3,CCC\n")
	b.createJob(0, map[string]any{"input": map[string]any{"upload_id": u.UploadID}, "chunk_rows": 2})
	tk, ok := b.claim("w", nil)
	if !ok {
		t.Fatal("no task to claim")
	}
	before := blobs.opens.Load() // the job's creation read the upload
	req, _ := http.NewRequest("HEAD", b.url+tk.Input.URL, nil)
	req.Header.Set("Authorization", "Bearer "+b.tokens.Worker)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := blobs.opens.Load() - before; n != 0 {
		t.Errorf("HEAD opened the blob store %d times, want none", n)
	}
	status, data, h := b.download(tk.Input.URL)
	if n := blobs.opens.Load() - before; n != 1 {
		t.Errorf("GET opened the blob store %d times, want once", n)
	}
	if resp.StatusCode != 200 || status != 200 || string(data) != "id,smiles\nm1,C\nm2,CC\n" {
		t.Fatalf("HEAD %d, GET %d %q", resp.StatusCode, status, data)
	}
	for _, k := range []string{"Content-Length", "X-Content-SHA256", "ETag", "Content-Type"} {
		if resp.Header.Get(k) != h.Get(k) || h.Get(k) == "" {
			t.Errorf("%s: HEAD says %q, GET %q", k, resp.Header.Get(k), h.Get(k))
		}
	}
	// A task that is not a chunk of an upload is 404 to a HEAD as to a GET.
	req, _ = http.NewRequest("HEAD", b.url+"/tasks/nope/input", nil)
	req.Header.Set("Authorization", "Bearer "+b.tokens.Worker)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("HEAD of an unknown task's input: %d, want 404", resp.StatusCode)
	}
}

func TestUploadWithoutHeader(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens})
	var rows strings.Builder
	for i := range 10 {
		fmt.Fprintf(&rows, "m%d,%d\n", i, i)
	}
	u := b.upload(rows.String())
	j := b.createJob(0, map[string]any{"input": map[string]any{"upload_id": u.UploadID}, "chunk_rows": 3, "has_header": false})
	if j.Tasks.Total != 4 {
		t.Fatalf("10 rows in chunks of 3 made %d tasks, want 4", j.Tasks.Total)
	}
	var all strings.Builder
	for range 4 {
		tk, _ := b.claim("w", nil)
		if tk.HasHeader {
			t.Fatal("a task of a job without header says it has one")
		}
		_, data, _ := b.download(tk.Input.URL)
		all.Write(data)
	}
	if all.String() != rows.String() {
		t.Fatalf("chunks without header put together %q, want the table %q", all.String(), rows.String())
	}
}

func TestUploadRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens, maxUpload: 1000})
	tests := []struct {
		name, body string
		status     int
		code, msg  string
	}{
		{"ragged", "id,score\na,1\nb,2,3\n", 400, "invalid_argument", "line 3"},
		{"unterminated quote", "id,score\na,1\n\"b,2\n", 400, "invalid_argument", "line 3"},
		{"bare quote", "id,score\na\"b,1\n", 400, "invalid_argument", "line 2"},
		{"empty", "", 400, "invalid_argument", "empty"},
		{"too large", "id,score\n" + strings.Repeat("a,1\n", 300), 413, "too_large", "limit"},
	}
	for _, tt := range tests {
		r := b.client("POST", "/upload", tt.body)
		if r.status != tt.status || r.errCode() != tt.code || !strings.Contains(errMessage(r), tt.msg) {
			t.Errorf("%s: %s, want %d %s mentioning %q", tt.name, r, tt.status, tt.code, tt.msg)
		}
	}
	r := b.client("POST", "/jobs", jobBody(0, map[string]any{"input": map[string]any{"upload_id": "s0:unone"}}))
	if r.status != 404 || r.errCode() != "not_found" {
		t.Errorf("job from an unknown upload: %s, want 404", r)
	}
	u := b.upload("id,score\n")
	r = b.client("POST", "/jobs", jobBody(0, map[string]any{"input": map[string]any{"upload_id": u.UploadID}}))
	if r.status != 400 || !strings.Contains(errMessage(r), "no rows") {
		t.Errorf("job from a header-only upload: %s, want 400 naming the missing rows", r)
	}
	var list struct{ Jobs []job }
	b.mustStatus(b.client("GET", "/jobs", nil), 200).decode(t, &list)
	if len(list.Jobs) != 0 {
		t.Errorf("refused requests created %d jobs", len(list.Jobs))
	}
}

// TestUploadLeavesNoFile checks that a refused upload leaves no file behind.
func TestUploadLeavesNoFile(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens})
	before := countFiles(t, b.dataDir)
	b.mustStatus(b.client("POST", "/upload", "a,b\n1\n"), 400)
	if after := countFiles(t, b.dataDir); after != before {
		t.Fatalf("a refused upload left files: %d before, %d after", before, after)
	}
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestHostedChunkHasNoInputHere(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens})
	b.createJob(1, nil)
	tk, _ := b.claim("w", nil)
	status, data, _ := b.download(b.url + "/tasks/" + tk.TaskID + "/input")
	if status != 404 || !strings.Contains(string(data), "https://data.example.org/c0.csv") {
		t.Fatalf("input of a hosted chunk: %d %s, want 404 naming where it is", status, data)
	}
}

func TestTaskLogs(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens})
	b.createJob(1, map[string]any{"lease_seconds": 5, "max_attempts": 3})
	tk, _ := b.claim("w", nil)
	logPath := "/tasks/" + tk.TaskID + "/logs"
	b.mustStatus(b.worker("POST", logPath, map[string]any{"worker_id": "w", "attempt": 1, "lines": []string{"starting", "50%"}}), http.StatusNoContent)
	r := b.worker("POST", logPath, map[string]any{"worker_id": "intruder", "attempt": 1, "lines": []string{"x"}})
	if r.status != 409 || r.errCode() != "lease_lost" {
		t.Fatalf("logs from another worker: %s, want 409 lease_lost", r)
	}
	b.mustStatus(b.worker("POST", logPath, map[string]any{"worker_id": "w", "attempt": 1, "lines": make([]string, 1001)}), 400)

	// A second attempt, then a follower that sees the old lines, the new
	// ones as they come, and ends when the task completes.
	b.clock.Advance(6 * time.Second)
	if _, err := b.engine.ExpireLeases(t.Context()); err != nil {
		t.Fatal(err)
	}
	tk2, _ := b.claim("w2", nil)
	type streamed struct {
		body string
		err  error
	}
	done := make(chan streamed, 1)
	go func() {
		req, _ := http.NewRequest("GET", b.url+logPath+"?follow=1", nil)
		req.Header.Set("Authorization", "Bearer "+tokens.Client)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- streamed{err: err}
			return
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		done <- streamed{string(data), err}
	}()
	time.Sleep(200 * time.Millisecond)
	b.mustStatus(b.worker("POST", logPath, map[string]any{"worker_id": "w2", "attempt": 2, "lines": []string{"retrying"}}), http.StatusNoContent)
	time.Sleep(200 * time.Millisecond)
	b.mustStatus(b.worker("POST", "/tasks/"+tk2.TaskID+"/result", result("w2", 2, "id,score\n")), 200)
	// Lines sent by the attempt that completed the task are still kept.
	b.mustStatus(b.worker("POST", logPath, map[string]any{"worker_id": "w2", "attempt": 2, "lines": []string{"done"}}), http.StatusNoContent)
	var got streamed
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the follow stream did not end after the task completed")
	}
	if got.err != nil {
		t.Fatal(got.err)
	}
	if !strings.HasPrefix(got.body, "--- attempt 1 ---\nstarting\n50%\n--- attempt 2 ---\nretrying\n") {
		t.Fatalf("followed log %q", got.body)
	}
	plain := b.mustStatus(b.client("GET", logPath, nil), 200)
	if want := "--- attempt 1 ---\nstarting\n50%\n--- attempt 2 ---\nretrying\ndone\n"; string(plain.body) != want {
		t.Fatalf("log %q, want %q", plain.body, want)
	}
	if ct := plain.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("log Content-Type %q", ct)
	}
	r = b.client("GET", "/tasks/s0:none/logs", nil)
	if r.status != 404 {
		t.Errorf("log of an unknown task: %s", r)
	}
}

// TestTaskLogAppendReplay sends the same batch of log lines twice, as a
// worker does when the answer to the first was lost: with an offset the
// lines are stored once; without one (an older worker) twice, as before.
func TestTaskLogAppendReplay(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		t.Run(storeName(pg), func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{tokens: tokens, postgres: pg})
			b.createJob(1, nil)
			tk, _ := b.claim("w", nil)
			logPath := "/tasks/" + tk.TaskID + "/logs"
			batch := func(offset any, lines ...string) map[string]any {
				m := map[string]any{"worker_id": "w", "attempt": 1, "lines": lines}
				if offset != nil {
					m["offset"] = offset
				}
				return m
			}
			for range 2 {
				b.mustStatus(b.worker("POST", logPath, batch(0, "one", "two")), http.StatusNoContent)
			}
			for range 2 {
				b.mustStatus(b.worker("POST", logPath, batch(2, "three")), http.StatusNoContent)
			}
			for range 2 {
				b.mustStatus(b.worker("POST", logPath, batch(nil, "old worker")), http.StatusNoContent)
			}
			if r := b.worker("POST", logPath, batch(-1, "x")); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "offset") {
				t.Fatalf("a negative offset = %s, want 400 naming it", r)
			}
			if r := b.worker("POST", logPath, batch("1", "x")); r.status != http.StatusBadRequest {
				t.Fatalf("an offset that is not a number = %s, want 400", r)
			}
			got := b.mustStatus(b.client("GET", logPath, nil), 200)
			if want := "--- attempt 1 ---\none\ntwo\nthree\nold worker\nold worker\n"; string(got.body) != want {
				t.Fatalf("log %q, want %q", got.body, want)
			}
		})
	}
}

// TestInputURLIgnoresHostAndForwardedHeaders claims a chunk of an upload
// with the Host and forwarding headers a proxy sets, or a caller forges:
// input.url is the same relative reference whatever they say, so it can
// never point a worker (and its token) at another origin.
func TestInputURLIgnoresHostAndForwardedHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens})
	u := b.upload("id,v\na,1\nb,2\nc,3\n")
	b.createJob(0, map[string]any{"input": map[string]any{"upload_id": u.UploadID}, "chunk_rows": 1})
	for _, h := range []http.Header{
		{},
		{"X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"evil.example"}},
		{"Forwarded": {`for=192.0.2.1;proto=https;host="evil.example:443"`}, "X-Forwarded-Prefix": {"/elsewhere"}},
	} {
		req, _ := http.NewRequest("POST", b.url+"/tasks/claim", strings.NewReader(`{"worker_id":"w"}`))
		req.Header = h.Clone()
		req.Header.Set("Authorization", "Bearer "+tokens.Worker)
		req.Header.Set("Content-Type", "application/json")
		req.Host = "proxy.example:8443"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var tk task
		err = json.NewDecoder(resp.Body).Decode(&tk)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("claim with headers %v: %d %v", h, resp.StatusCode, err)
		}
		if want := "/tasks/" + tk.TaskID + "/input"; tk.Input.URL != want {
			t.Errorf("claim with Host proxy.example:8443 and %v: input.url %q, want %q", h, tk.Input.URL, want)
		}
		var got task
		b.mustStatus(b.client("GET", "/tasks/"+tk.TaskID, nil), 200).decode(t, &got)
		if got.Input.URL != tk.Input.URL {
			t.Errorf("GET /tasks/%s input.url %q, want %q as claimed", tk.TaskID, got.Input.URL, tk.Input.URL)
		}
	}
}
