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

	"connectrpc.com/connect"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/rpc"
	"github.com/scimesh/scimesh/internal/worker"
	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
)

// answerLosingProxy is a proxy in front of the coordinator that lets every
// log append through, but turns the answer to the first that succeeded
// into a 503, as if it had been lost on the way back.
type answerLosingProxy struct {
	url           string
	appends, lost atomic.Int32
}

// newAnswerLosingProxy proxies to target. isAppend tells a log append
// from other requests; loseAnswer rewrites the answer to a successful one
// into the protocol's "unavailable, retry".
func newAnswerLosingProxy(t *testing.T, target string, isAppend func(*http.Response) bool, loseAnswer func(*http.Response)) *answerLosingProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &answerLosingProxy{}
	tr := &http.Transport{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.Transport = tr
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method != http.MethodPost || !isAppend(resp) {
			return nil
		}
		p.appends.Add(1)
		if resp.StatusCode/100 == 2 && p.lost.CompareAndSwap(0, 1) {
			loseAnswer(resp)
			resp.Header.Del("Content-Length")
			resp.ContentLength = -1
		}
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(func() { srv.Close(); tr.CloseIdleConnections() })
	p.url = srv.URL
	return p
}

// check fails the test unless an answer was lost and the batch sent again.
func (p *answerLosingProxy) check(t *testing.T) {
	t.Helper()
	if p.lost.Load() != 1 || p.appends.Load() < 2 {
		t.Fatalf("%d log appends went through the proxy, %d answers lost; want at least 2 and 1", p.appends.Load(), p.lost.Load())
	}
}

// checkLinesOnce fails the test unless the task's log holds each line once.
func (b *bundle) checkLinesOnce(taskID string, lines ...string) {
	b.t.Helper()
	rc, err := b.client.Logs(b.t.Context(), taskID, false)
	if err != nil {
		b.t.Fatal(err)
	}
	text, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		b.t.Fatal(err)
	}
	for _, line := range lines {
		if n := strings.Count(string(text), line+"\n"); n != 1 {
			b.t.Errorf("the log holds %q %d times, want once:\n%s", line, n, text)
		}
	}
}

// TestLogAnswerLostIsNotDuplicated loses the answer to the first log
// append through the REST API (POST /tasks/{id}/logs): the worker sends
// the batch again, and the task's log holds every line once.
func TestLogAnswerLostIsNotDuplicated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := newAnswerLosingProxy(t, b.url,
		func(resp *http.Response) bool { return strings.HasSuffix(resp.Request.URL.Path, "/logs") },
		func(resp *http.Response) {
			resp.StatusCode, resp.Status = http.StatusServiceUnavailable, "503 Service Unavailable"
			resp.Body = io.NopCloser(strings.NewReader(`{"error":{"code":"unavailable","message":"answer lost"}}`))
			resp.Header.Set("Content-Type", "application/json")
		})

	command := `echo one >&2; echo two >&2; echo three >&2; sleep 0.3; ` + scoreCommand
	b.startWorkerAt(p.url, worker.Config{Workloads: []worker.Workload{mustWorkload(t, "score="+command)}})
	j := b.job(client.JobRequest{Workload: "score", TopK: 1}, "id,value\na,1\n")
	b.waitJob(j.JobID, client.JobCompleted, 20*time.Second)
	p.check(t)
	b.checkLinesOnce(b.tasks(j.JobID)[0].TaskID, "one", "two", "three")
}

// TestTreeLogAnswerLostIsNotDuplicated is TestLogAnswerLostIsNotDuplicated
// for a tree task, whose log goes through Worker.Log (the Connect
// protocol, as the worker's client speaks it): the batch sent again
// carries its offset, and the log holds every line once.
func TestTreeLogAnswerLostIsNotDuplicated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := newAnswerLosingProxy(t, b.url,
		func(resp *http.Response) bool { return resp.Request.URL.Path == scimeshv1connect.WorkerLogProcedure },
		func(resp *http.Response) {
			resp.StatusCode, resp.Status = http.StatusServiceUnavailable, "503 Service Unavailable"
			resp.Body = io.NopCloser(strings.NewReader(`{"code":"unavailable","message":"answer lost"}`))
			resp.Header = http.Header{"Content-Type": {"application/json"}}
		})

	command := `echo one >&2; echo two >&2; echo three >&2; sleep 0.3; echo 7`
	b.startWorkerAt(p.url, worker.Config{
		Trees:     scimeshv1connect.NewWorkerClient(http.DefaultClient, p.url, connect.WithInterceptors(rpc.Bearer(workerToken))),
		TreeSlots: 1,
		Workloads: []worker.Workload{mustWorkload(t, "echo="+command)},
	})
	q := scimeshv1connect.NewQueueClient(http.DefaultClient, b.url, connect.WithInterceptors(rpc.Bearer(clientToken)))
	sub, err := q.Submit(t.Context(), connect.NewRequest(&v1.SubmitRequest{Tasks: []*v1.TaskSpec{{Id: "s0:x", Workload: "echo"}}}))
	if err != nil {
		t.Fatal(err)
	}
	id := sub.Msg.RootId
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		info, err := q.Query(t.Context(), connect.NewRequest(&v1.QueryRequest{TaskId: id}))
		if err == nil && info.Msg.State == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tree task after 20 s: %v %v, want completed", info.Msg.GetState(), err)
		}
	}
	p.check(t)
	b.checkLinesOnce(id, "one", "two", "three")
}
