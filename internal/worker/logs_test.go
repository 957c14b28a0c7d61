package worker_test

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/worker"
)

// TestLogAnswerLostIsNotDuplicated puts a proxy in front of the
// coordinator that lets the first log append through but answers the
// worker 503, as if the answer had been lost: the worker sends the batch
// again, and the task's log holds every line once.
func TestLogAnswerLostIsNotDuplicated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target, err := url.Parse(b.url)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = tr
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	var appends, lost atomic.Int32
	proxy.ModifyResponse = func(resp *http.Response) error {
		r := resp.Request
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/logs") {
			return nil
		}
		appends.Add(1)
		if resp.StatusCode == http.StatusNoContent && lost.CompareAndSwap(0, 1) {
			resp.StatusCode, resp.Status = http.StatusServiceUnavailable, "503 Service Unavailable"
			resp.Body = io.NopCloser(strings.NewReader(`{"error":{"code":"unavailable","message":"answer lost"}}`))
			resp.Header.Set("Content-Type", "application/json")
			resp.Header.Del("Content-Length")
			resp.ContentLength = -1
		}
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(func() { srv.Close(); tr.CloseIdleConnections() })

	command := `echo one >&2; echo two >&2; echo three >&2; sleep 0.3; ` + scoreCommand
	b.startWorkerAt(srv.URL, worker.Config{Workloads: []worker.Workload{mustWorkload(t, "score="+command)}})
	j := b.job(client.JobRequest{Workload: "score", TopK: 1}, "id,value\na,1\n")
	b.waitJob(j.JobID, client.JobCompleted, 20*time.Second)
	if lost.Load() != 1 || appends.Load() < 2 {
		t.Fatalf("%d log appends went through the proxy, %d answers lost; want at least 2 and 1", appends.Load(), lost.Load())
	}
	tk := b.tasks(j.JobID)[0]
	rc, err := b.client.Logs(t.Context(), tk.TaskID, false)
	if err != nil {
		t.Fatal(err)
	}
	text, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"one", "two", "three"} {
		if n := strings.Count(string(text), line+"\n"); n != 1 {
			t.Errorf("the log holds %q %d times, want once:\n%s", line, n, text)
		}
	}
}
