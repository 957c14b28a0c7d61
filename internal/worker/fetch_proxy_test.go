package worker_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/worker"
)

// TestTokenStaysBehindItsPrefix puts the coordinator behind a reverse
// proxy that maps /scimesh/ to it and /echo/ to another application on
// the same scheme, host and port. A job whose hosted chunk is on /echo/
// completes, and that application never sees the worker token; a job over
// an upload, whose chunks the coordinator serves at /scimesh/tasks/{id}/input,
// completes too, its chunks fetched with the token.
func TestTokenStaysBehindItsPrefix(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target, err := url.Parse(b.url)
	if err != nil {
		t.Fatal(err)
	}
	const chunk = "id,value\na,3\nb,5\n"
	var (
		mu    sync.Mutex
		echo  []string // the Authorization header of each request to /echo/
		input []string // likewise for /scimesh/tasks/{id}/input
	)
	tr := &http.Transport{}
	coord := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.URL.Path = strings.TrimPrefix(r.In.URL.Path, "/scimesh")
			r.Out.URL.RawPath = ""
		},
		Transport: tr,
		ErrorLog:  log.New(io.Discard, "", 0), // a claim cut short when the worker stops
	}
	mux := http.NewServeMux()
	mux.Handle("/scimesh/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/input") {
			mu.Lock()
			input = append(input, r.Header.Get("Authorization"))
			mu.Unlock()
		}
		coord.ServeHTTP(w, r)
	}))
	mux.HandleFunc("/echo/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		echo = append(echo, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = io.WriteString(w, chunk)
	})
	gw := httptest.NewServer(mux)
	t.Cleanup(func() { gw.Close(); tr.CloseIdleConnections() })

	// The worker knows the coordinator as http://gw/scimesh; its hosted
	// inputs on loopback are allowed, as setup's workers' are.
	b.startWorkerAt(gw.URL+"/scimesh", worker.Config{Workloads: []worker.Workload{mustWorkload(t, "score="+scoreCommand)}})

	sum := sha256.Sum256([]byte(chunk))
	hosted := b.createJob(client.JobRequest{Workload: "score", TopK: 1, Input: client.JobInput{Chunks: []client.ChunkRef{
		{URI: gw.URL + "/echo/x", SHA256: hex.EncodeToString(sum[:]), Bytes: int64(len(chunk))},
	}}})
	b.waitJob(hosted.JobID, client.JobCompleted, 20*time.Second)
	if got, want := b.result(hosted.JobID), "id,score,chunk\nb,5,0\n"; got != want {
		t.Errorf("hosted job's result %q, want %q", got, want)
	}

	up, err := b.client.Upload(t.Context(), strings.NewReader("id,value\nr0,1\nr1,7\nr2,4\nr3,2\n"))
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	uploaded := b.createJob(client.JobRequest{Workload: "score", ChunkRows: 2, TopK: 1, Input: client.JobInput{UploadID: up.UploadID}})
	b.waitJob(uploaded.JobID, client.JobCompleted, 20*time.Second)
	if got, want := b.result(uploaded.JobID), "id,score,chunk\nr1,7,0\n"; got != want {
		t.Errorf("uploaded job's result %q, want %q", got, want)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(echo) == 0 || strings.Join(echo, "") != "" {
		t.Errorf("the application on /echo/ was sent Authorization %q; want one request or more, none with the worker token", echo)
	}
	if len(input) != 2 || input[0] != "Bearer "+workerToken || input[1] != input[0] {
		t.Errorf("the coordinator's /scimesh/tasks/{id}/input was sent Authorization %q; want the worker token with each of the 2 chunks", input)
	}
}
