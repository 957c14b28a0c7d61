package httpapi_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/blob"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/testenv"
)

// TestQuotaExceeded: a job past its account's max_jobs, and an upload
// past its max_storage (its size declared or not), are 429
// quota_exceeded naming the quota, its limit and the use, and leave no
// job, no upload row and no blob. A declared upload is refused before
// its body is read; an undeclared one is cut off, not read to its end.
func TestQuotaExceeded(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		name := map[bool]string{false: "sqlite", true: "postgres"}[pg]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{postgres: pg, tokens: auth.Tokens{Client: "client-token", Worker: "worker-token"}})
			_, token, err := b.engine.CreateAccount(t.Context(), domain.Account{Name: "alice", MaxJobs: 1, MaxStorage: 100})
			if err != nil {
				t.Fatal(err)
			}
			job := map[string]any{"workload": "w", "input": map[string]any{"chunks": []map[string]any{{"uri": "https://x.org/a", "sha256": strings.Repeat("0", 64)}}}}
			b.mustStatus(b.do("POST", "/jobs", token, job), 201)
			r := b.do("POST", "/jobs", token, job)
			if r.status != 429 || r.errCode() != "quota_exceeded" || !strings.Contains(string(r.body), "max_jobs") || !strings.Contains(string(r.body), "1 unfinished jobs of 1 allowed") {
				t.Errorf("a job past max_jobs: %v; want 429 quota_exceeded naming max_jobs, 1 of 1", r)
			}
			if n, err := b.store.JobCountUnfinished(t.Context(), "alice"); err != nil || n != 1 {
				t.Errorf("alice's jobs after the refusal: %d, %v; want 1", n, err)
			}

			b.mustStatus(b.do("POST", "/upload", token, "id\n"+strings.Repeat("x\n", 28)+"y"), 201) // 60 bytes
			blobs := blobFiles(t, b.dataDir)

			// Declared: answered before the body is sent.
			body := heldBody(1<<20, 64<<10)
			resp := sendUpload(t, b.url, token, body, 1<<20)
			if resp.status != 429 || resp.errCode() != "quota_exceeded" || !strings.Contains(string(resp.body), "60 bytes of 100 allowed") {
				t.Errorf("a declared upload past max_storage: %v; want 429 quota_exceeded naming the use and the limit", resp)
			}
			if n := body.N(); n > 64<<10 {
				t.Errorf("the client sent %d bytes of a declared upload past the quota; the server should answer before reading it", n)
			}
			// Undeclared: cut off, the answer given without the rest.
			body = heldBody(1<<30, 8<<20)
			resp = sendUpload(t, b.url, token, body, -1)
			if resp.status != 429 || resp.errCode() != "quota_exceeded" || !strings.Contains(string(resp.body), "cut off") {
				t.Errorf("an undeclared upload past max_storage: %v; want 429 quota_exceeded, cut off", resp)
			}
			if n, err := b.store.UploadSumBytes(t.Context(), "alice"); err != nil || n != 60 {
				t.Errorf("alice's uploads after the refusals: %d bytes, %v; want 60", n, err)
			}
			if got := blobFiles(t, b.dataDir); len(got) != len(blobs) {
				t.Errorf("blob files after the refusals: %v; want only %v", got, blobs)
			}
		})
	}
}

// blobFiles lists the files under dir but the blob store's marker.
func blobFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() != blob.MarkerName {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// sendUpload posts body to /upload with token, its length declared (-1:
// chunked), and returns the answer, which must come while the body is
// still held.
func sendUpload(t *testing.T, url, token string, body *testenv.Held, length int64) response {
	t.Helper()
	defer body.Release()
	req, err := http.NewRequest("POST", url+"/upload", body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "text/csv")
	hc := &http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// heldBody is a table of n bytes, a header line "id" then one long
// record, that past hold bytes waits until released (testenv.Held).
func heldBody(n, hold int64) *testenv.Held {
	return &testenv.Held{R: io.LimitReader(io.MultiReader(strings.NewReader("id\n"), testenv.Endless('x')), n), Hold: hold}
}
