package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/segmentio/encoding/json"
	"github.com/valyala/fasthttp"

	"github.com/scimesh/scimesh/internal/client"
)

// The load generators of Config.Load.
const (
	// LoadClient drives the coordinator through internal/client on
	// net/http, the worker's own client.
	LoadClient = "client"
	// LoadLean drives it with fasthttp's requests and responses on
	// connections of its own (driveLean), at about half the client's CPU
	// per lifecycle, so that on a machine whose cores the load generator
	// shares with the server the figure is more the server's and less the
	// client's.
	LoadLean = "lean"
)

// statusError is a coordinator's answer the lean load generator did not
// expect.
type statusError struct {
	status int
	body   string
}

func (e *statusError) Error() string { return fmt.Sprintf("status %d: %s", e.status, e.body) }

// leanRetryable is client.IsRetryable for the lean load generator: a 503,
// or a connection that failed (the request went over a new one, the next
// time).
func leanRetryable(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		return se.status == http.StatusServiceUnavailable
	}
	var ce *connError
	return errors.As(err, &ce)
}

// connError is a request that failed on its connection (which is then
// closed): sending it, or reading its answer.
type connError struct{ err error }

func (e *connError) Error() string { return e.err.Error() }
func (e *connError) Unwrap() error { return e.err }

// leanConn is one keep-alive connection of the lean load generator, with
// fasthttp's request and response; a worker has one at a time.
type leanConn struct {
	conn net.Conn // nil until dialled, and after a failure
	br   *bufio.Reader
	bw   *bufio.Writer
	req  fasthttp.Request
	resp fasthttp.Response
}

// do sends req and reads the answer into resp, over the connection it
// dials first when it has none.
func (lc *leanConn) do(addr string) error {
	if lc.conn == nil {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return &connError{err}
		}
		lc.conn = c
		lc.br.Reset(c)
		lc.bw.Reset(c)
	}
	err := lc.req.Write(lc.bw)
	if err == nil {
		err = lc.bw.Flush()
	}
	if err == nil {
		err = lc.resp.Read(lc.br)
	}
	if err != nil || lc.resp.ConnectionClose() {
		lc.close()
	}
	if err != nil {
		return &connError{err}
	}
	return nil
}

func (lc *leanConn) close() {
	if lc.conn != nil {
		lc.conn.Close()
		lc.conn = nil
	}
}

// driveLean is drive with fasthttp's requests and responses in place of
// internal/client: the same requests (the single or the batch form of
// claim and result, with the worker token), the same bodies, one
// keep-alive connection per worker, and the same timing and retries. Its
// connections are its own (no pool and no goroutine of fasthttp's), and
// closed when it returns.
func driveLean(ctx context.Context, base, token string, workloads []string, c Config) result {
	u, err := url.Parse(base)
	if err != nil {
		return result{err: fmt.Errorf("coordinator URL %q: %w", base, err)}
	}
	if u.Scheme != "http" || u.Path != "" {
		return result{err: fmt.Errorf("--load lean speaks plain HTTP to a coordinator at the root of its host: %q is not such a URL", base)}
	}
	conns := make(chan *leanConn, c.Workers)
	for range c.Workers {
		conns <- &leanConn{br: bufio.NewReader(nil), bw: bufio.NewWriter(nil)}
	}
	defer func() {
		for range c.Workers {
			(<-conns).close()
		}
	}()
	auth := ""
	if token != "" {
		auth = "Bearer " + token
	}
	// call POSTs body to path and decodes a 200's answer into out; a 204
	// is an answer too (a claim that found nothing), any other status an
	// error.
	call := func(path string, body any, out any) (int, error) {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		lc := <-conns
		defer func() { conns <- lc }()
		lc.req.Reset()
		lc.req.Header.SetMethod(http.MethodPost)
		lc.req.SetRequestURI(path)
		lc.req.Header.SetHost(u.Host)
		lc.req.Header.SetContentType("application/json")
		if auth != "" {
			lc.req.Header.Set("Authorization", auth)
		}
		lc.req.SetBodyRaw(b)
		if err := lc.do(u.Host); err != nil {
			return 0, err
		}
		switch status := lc.resp.StatusCode(); status {
		case http.StatusOK:
			return status, json.Unmarshal(lc.resp.Body(), out)
		case http.StatusNoContent:
			return status, nil
		default:
			return status, &statusError{status: status, body: string(lc.resp.Body())}
		}
	}
	// The requests are internal/client's types, so that their bodies are
	// the Go client's; of an answer only what the next request needs is
	// decoded.
	type claimed struct {
		TaskID  string `json:"task_id"`
		JobID   string `json:"job_id"`
		Attempt int    `json:"attempt"`
	}
	type claimBody struct {
		client.ClaimRequest
		MaxTasks int `json:"max_tasks,omitempty"`
	}
	versions := workloadVersions(workloads, c.Version)
	try := func(f func() error) (time.Duration, int, error) { return retry(leanRetryable, f) }
	return work(ctx, c, func(id string, n int) (lifecycle, error) {
		var tasks []claimed
		took, claimRetried, err := try(func() error {
			body := claimBody{ClaimRequest: client.ClaimRequest{WorkerID: id, Workloads: workloads, WorkloadVersions: versions}}
			if n == 1 {
				var t claimed
				status, err := call("/tasks/claim", body, &t)
				tasks = nil
				if err == nil && status == http.StatusOK {
					tasks = []claimed{t}
				}
				return err
			}
			body.MaxTasks = n
			var out struct {
				Tasks []claimed `json:"tasks"`
			}
			_, err := call("/tasks/claim", body, &out)
			tasks = out.Tasks
			return err
		})
		if err != nil {
			return lifecycle{}, fmt.Errorf("claim: %w", err)
		}
		if len(tasks) == 0 {
			return lifecycle{}, fmt.Errorf("claim found nothing with tasks left; the backlog ran out")
		}
		hold(ctx, c.TaskTime)
		var resultTook time.Duration
		var retried int
		if n == 1 {
			t := tasks[0]
			var task struct{} // the task as recorded: only its status counts
			resultTook, retried, err = try(func() error {
				_, err := call("/tasks/"+url.PathEscape(t.TaskID)+"/result", client.Result{WorkerID: id, Attempt: t.Attempt, Output: noopOutput, WorkloadVersion: c.Version}, &task)
				return err
			})
		} else {
			items := make([]client.Result, len(tasks))
			for i, t := range tasks {
				items[i] = client.Result{TaskID: t.TaskID, WorkerID: id, Attempt: t.Attempt, Output: noopOutput, WorkloadVersion: c.Version}
			}
			var out struct {
				Results []struct {
					Status int `json:"status"`
				} `json:"results"`
			}
			resultTook, retried, err = try(func() error {
				_, err := call("/tasks/results", struct {
					Results []client.Result `json:"results"`
				}{items}, &out)
				return err
			})
			for _, s := range out.Results {
				if err == nil && s.Status != http.StatusOK {
					err = fmt.Errorf("result item: status %d", s.Status)
				}
			}
		}
		if err != nil {
			return lifecycle{}, fmt.Errorf("result: %w", err)
		}
		l := lifecycle{end: time.Now(), claim: took, result: resultTook, tasks: len(tasks), retried: claimRetried + retried}
		if c.Accounts > 0 {
			for _, t := range tasks {
				l.jobs = append(l.jobs, t.JobID)
			}
		}
		return l, nil
	})
}
