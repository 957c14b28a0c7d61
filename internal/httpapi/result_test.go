package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/store"
)

// completeBigJob runs a one-chunk job whose final CSV is rows rows of
// about 100 bytes, through a worker's claim and result and the stitcher,
// and returns its ID and the final CSV as the store holds it.
func (b *bundle) completeBigJob(rows int) (string, []byte) {
	b.t.Helper()
	j := b.createJob(1, map[string]any{"top_k": rows})
	var out strings.Builder
	out.WriteString("id,score\n")
	for i := range rows {
		fmt.Fprintf(&out, "molecule-%06d-%s,%d\n", i, strings.Repeat("c", 80), i)
	}
	tk, ok := b.claim("w1", nil)
	if !ok {
		b.t.Fatal("no task to claim")
	}
	b.mustStatus(b.worker("POST", "/tasks/"+tk.TaskID+"/result", result("w1", 1, out.String())), http.StatusOK)
	b.waitJob(j.JobID, "completed")
	var stored []byte
	for {
		piece, err := b.store.JobResultRead(b.t.Context(), &store.JobResultReadParams{ID: j.JobID, Offset: int64(len(stored)), Limit: 1 << 20})
		if err != nil {
			b.t.Fatal(err)
		}
		if len(piece) == 0 {
			break
		}
		stored = append(stored, piece...)
	}
	return j.JobID, stored
}

// TestJobResultLargerThanAPiece downloads a final CSV that the engine
// reads from the store in several pieces, from the REST API and from the
// dashboard, and checks that both give the stored bytes exactly, with
// their length and sha256 in the headers.
func TestJobResultLargerThanAPiece(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		t.Run(storeName(pg), func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{tokens: tokens, postgres: pg})
			id, stored := b.completeBigJob(24_000)
			if len(stored) <= 2*engine.ResultPiece {
				t.Fatalf("the final CSV is %d bytes, not over two pieces of %d", len(stored), engine.ResultPiece)
			}
			sum := sha256.Sum256(stored)
			etag := `"sha256:` + hex.EncodeToString(sum[:]) + `"`
			check := func(what string, r response) {
				t.Helper()
				if !bytes.Equal(r.body, stored) {
					t.Errorf("%s: %d bytes that differ from the %d stored", what, len(r.body), len(stored))
				}
				if got := r.header.Get("Content-Length"); got != strconv.Itoa(len(stored)) {
					t.Errorf("%s: Content-Length %q, want %d", what, got, len(stored))
				}
				if got := r.header.Get("Content-Type"); got != "text/csv; charset=utf-8" {
					t.Errorf("%s: Content-Type %q", what, got)
				}
				if got := r.header.Get("ETag"); got != etag {
					t.Errorf("%s: ETag %q, want %q", what, got, etag)
				}
			}

			check("GET /jobs/{id}/result", b.mustStatus(b.client("GET", "/jobs/"+id+"/result", nil), http.StatusOK))
			head := b.mustStatus(b.client("HEAD", "/jobs/"+id+"/result", nil), http.StatusOK)
			if len(head.body) != 0 || head.header.Get("Content-Length") != strconv.Itoa(len(stored)) {
				t.Errorf("HEAD: %d bytes of body, Content-Length %q; want none and %d", len(head.body), head.header.Get("Content-Length"), len(stored))
			}

			jar, _ := cookiejar.New(nil)
			c := &http.Client{Jar: jar}
			login, err := c.PostForm(b.url+"/ui/login", url.Values{"token": {tokens.Client}, "next": {"/ui/jobs"}})
			if err != nil {
				t.Fatal(err)
			}
			login.Body.Close()
			resp, err := c.Get(b.url + "/ui/jobs/" + url.PathEscape(id) + "/result")
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("dashboard download: %d, %v", resp.StatusCode, err)
			}
			check("the dashboard's download", response{status: resp.StatusCode, header: resp.Header, body: body})
			if cd := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment;") {
				t.Errorf("dashboard download: Content-Disposition %q, want an attachment", cd)
			}
		})
	}
}

// failAfterFirstPiece is a store whose job results end after their first
// piece with the job gone, as when retention deletes the job during a
// download.
type failAfterFirstPiece struct{ store.Store }

func (f failAfterFirstPiece) JobResultRead(ctx context.Context, p *store.JobResultReadParams) ([]byte, error) {
	if p.Offset > 0 {
		return nil, fmt.Errorf("job %s: %w", p.ID, store.ErrNotFound)
	}
	return f.Store.JobResultRead(ctx, p)
}

// TestJobResultCutShort checks that a download that fails once its headers
// are sent is an error to the client, not a CSV that looks whole.
func TestJobResultCutShort(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens, wrap: func(s store.Store) store.Store { return failAfterFirstPiece{s} }})
	id, stored := b.completeBigJob(24_000)
	req, err := http.NewRequest("GET", b.url+"/jobs/"+id+"/result", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tokens.Client)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(stored)) {
		t.Fatalf("%d with Content-Length %d; want 200 and %d", resp.StatusCode, resp.ContentLength, len(stored))
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(body) != engine.ResultPiece || !bytes.Equal(body, stored[:len(body)]) {
		t.Errorf("body read: %d bytes, %v; want the first piece of %d, then io.ErrUnexpectedEOF", len(body), err, engine.ResultPiece)
	}
}

// goneAtFirstPiece is a store whose job results are gone before their
// first piece is read: the job deleted between its read and its result's.
type goneAtFirstPiece struct{ store.Store }

func (f goneAtFirstPiece) JobResultRead(_ context.Context, p *store.JobResultReadParams) ([]byte, error) {
	return nil, fmt.Errorf("job %s: %w", p.ID, store.ErrNotFound)
}

// TestJobResultGoneBeforeFirstPiece checks that a result that cannot be
// read at all is an error status, not an empty 200: the first piece is
// read before the headers are sent.
func TestJobResultGoneBeforeFirstPiece(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens, wrap: func(s store.Store) store.Store { return goneAtFirstPiece{s} }})
	id, _ := b.completeBigJob(24_000)
	req, err := http.NewRequest("GET", b.url+"/jobs/"+id+"/result", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tokens.Client)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNotFound || !bytes.Contains(body, []byte(`"not_found"`)) {
		t.Errorf("%d %s; want 404 not_found", resp.StatusCode, body)
	}
}

// TestJobResultRangeAndETag checks the ranged and conditional forms of the
// result's download: a range across two store pieces is exact, and the
// ETag answers 304.
func TestJobResultRangeAndETag(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens})
	id, stored := b.completeBigJob(24_000)
	get := func(header, value string) (*http.Response, []byte) {
		req, err := http.NewRequest("GET", b.url+"/jobs/"+id+"/result", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tokens.Client)
		req.Header.Set(header, value)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	from, to := engine.ResultPiece-10, engine.ResultPiece+10 // across the first piece's end
	resp, body := get("Range", fmt.Sprintf("bytes=%d-%d", from, to))
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, stored[from:to+1]) {
		t.Errorf("range %d-%d: %d, %d bytes; want 206 and the stored bytes", from, to, resp.StatusCode, len(body))
	}
	resp, _ = get("Range", "bytes=0-0")
	etag := resp.Header.Get("ETag")
	if resp, _ = get("If-None-Match", etag); etag == "" || resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match %s: %d, want 304", etag, resp.StatusCode)
	}
}

// TestJobResultPartial: ?partial=true on a running job answers the best
// rows of the chunks completed so far, with how many of how many, where
// the plain result is 409 not_ready; on the completed job it answers the
// final CSV; a partial that is not a boolean is 400.
func TestJobResultPartial(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens})
	j := b.createJob(3, map[string]any{"top_k": 2})
	partial := func() response {
		t.Helper()
		return b.mustStatus(b.client("GET", "/jobs/"+j.JobID+"/result?partial=true", nil), http.StatusOK)
	}
	if r := partial(); len(r.body) != 0 || r.header.Get("SciMesh-Chunks-Done") != "0" || r.header.Get("SciMesh-Chunks-Total") != "3" {
		t.Errorf("before any chunk: %q, %s of %s chunks; want nothing, 0 of 3", r.body, r.header.Get("SciMesh-Chunks-Done"), r.header.Get("SciMesh-Chunks-Total"))
	}
	outputs := []string{"id,score\na,1\nb,5\n", "id,score\nc,3\n", "id,score\nd,4\ne,2\n"}
	for range 2 {
		tk, ok := b.claim("w1", nil)
		if !ok {
			t.Fatal("no task to claim")
		}
		b.mustStatus(b.worker("POST", "/tasks/"+tk.TaskID+"/result", result("w1", 1, outputs[tk.ChunkIndex])), http.StatusOK)
	}
	if r := b.client("GET", "/jobs/"+j.JobID+"/result", nil); r.status != http.StatusConflict || r.errCode() != "not_ready" {
		t.Errorf("the result of a running job: %s; want 409 not_ready", r)
	}
	r := partial()
	if want := "id,score\nb,5\nc,3\n"; string(r.body) != want || r.header.Get("SciMesh-Chunks-Done") != "2" {
		t.Errorf("after chunks 0 and 1: %q over %s chunks; want %q over 2", r.body, r.header.Get("SciMesh-Chunks-Done"), want)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/csv; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	tk, _ := b.claim("w1", nil)
	b.mustStatus(b.worker("POST", "/tasks/"+tk.TaskID+"/result", result("w1", 1, outputs[2])), http.StatusOK)
	b.waitJob(j.JobID, "completed")
	final := b.mustStatus(b.client("GET", "/jobs/"+j.JobID+"/result", nil), http.StatusOK)
	if r := partial(); !bytes.Equal(r.body, final.body) || string(r.body) != "id,score\nb,5\nd,4\n" || r.header.Get("SciMesh-Chunks-Done") != "3" {
		t.Errorf("partial of the completed job: %q over %s chunks; want the final %q over 3", r.body, r.header.Get("SciMesh-Chunks-Done"), final.body)
	}
	if r := b.client("GET", "/jobs/"+j.JobID+"/result?partial=maybe", nil); r.status != http.StatusBadRequest {
		t.Errorf("partial=maybe: %s; want 400", r)
	}
}
