// Command floor is the HTTP floor of bench/load.sh's REST forms: a server
// that answers the calls `scimesh-bench --coordinator` makes (POST /jobs,
// POST /tasks/claim, POST /tasks/{id}/result, POST /tasks/results, GET
// /jobs/{id}) with bodies like a coordinator's (internal/client's
// types), checking the bearer token
// and decoding and encoding JSON with segmentio/encoding/json as serve does,
// but with no queue behind them: a claim is a counter. What the load
// generator gets from it is what the HTTP and JSON of a lifecycle cost on
// this machine, with no engine, store or middleware: the most any
// coordinator behind this API could do here.
//
//	floor -addr 127.0.0.1:PORT
//
// The tokens come from CLIENT_AUTH_TOKEN and WORKER_AUTH_TOKEN.
package main

import (
	"crypto/subtle"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/segmentio/encoding/json"

	"github.com/scimesh/scimesh/internal/client"
)

// claimRequest is POST /tasks/claim's body, the batch form's max_tasks
// included.
type claimRequest struct {
	client.ClaimRequest
	MaxTasks int `json:"max_tasks"`
}

type server struct {
	clientToken, workerToken string
	total, claimed, done     atomic.Int64
	workload                 atomic.Value // string
	created                  time.Time
}

const jobID = "floor:job"

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen on `ADDR`")
	flag.Parse()
	s := &server{clientToken: os.Getenv("CLIENT_AUTH_TOKEN"), workerToken: os.Getenv("WORKER_AUTH_TOKEN"), created: time.Now().UTC()}
	s.workload.Store("")
	mux := http.NewServeMux()
	mux.HandleFunc("POST /jobs", s.auth(s.clientToken, s.createJob))
	mux.HandleFunc("GET /jobs/{id}", s.auth(s.clientToken, s.getJob))
	mux.HandleFunc("POST /tasks/claim", s.auth(s.workerToken, s.claim))
	mux.HandleFunc("POST /tasks/{id}/result", s.auth(s.workerToken, s.result))
	mux.HandleFunc("POST /tasks/results", s.auth(s.workerToken, s.results))
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	log.Fatal((&http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}).ListenAndServe())
}

func (s *server) auth(token string, h http.HandlerFunc) http.HandlerFunc {
	want := []byte("Bearer " + token)
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]string{"code": "unauthenticated", "message": "wrong token"}})
			return
		}
		h(w, r)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]string{"code": "invalid_argument", "message": "send JSON"}})
		return false
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<20))
	if err == nil {
		err = json.Unmarshal(data, v)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]string{"code": "invalid_argument", "message": err.Error()}})
		return false
	}
	return true
}

func (s *server) job() map[string]any {
	total, done := s.total.Load(), s.done.Load()
	claimed := s.claimed.Load()
	return map[string]any{
		"job_id": jobID, "name": "bench", "workload": s.workload.Load(), "status": "running", "priority": 0,
		"created_at": s.created, "updated_at": time.Now().UTC(), "finished_at": nil, "error": nil, "progress": 0,
		"tasks": map[string]int64{"total": total, "pending": max(total-claimed, 0), "leased": claimed - done, "completed": done, "failed": 0, "cancelled": 0},
	}
}

func (s *server) createJob(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Workload string `json:"workload"`
		Input    struct {
			Chunks []json.RawMessage `json:"chunks"`
		} `json:"input"`
	}
	if !decode(w, r, &req) {
		return
	}
	s.total.Store(int64(len(req.Input.Chunks)))
	s.workload.Store(req.Workload)
	writeJSON(w, http.StatusCreated, s.job())
}

func (s *server) getJob(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.job())
}

// task is task id (chunk n) as a coordinator answers for it, in state and
// held by owner.
func (s *server) task(id string, n, attempt int, state, owner string, now time.Time) client.Task {
	t := client.Task{
		TaskID: id, JobID: jobID, ChunkIndex: n, Attempt: attempt, MaxAttempts: 3,
		Workload: s.workload.Load().(string), Parameters: json.RawMessage("{}"), TopK: 1,
		ScoreColumn: "score", Order: "desc", HasHeader: true, State: state, LeaseOwner: owner,
		CreatedAt: s.created, UpdatedAt: now,
		Input: client.TaskInput{URL: fmt.Sprintf("https://bench.invalid/%d", n), SHA256: strings.Repeat("0", 64)},
	}
	if state == client.TaskLeased {
		expires := now.Add(10 * time.Minute)
		t.LeaseExpiresAt = &expires
	}
	return t
}

// next is the next task, claimed by worker.
func (s *server) next(worker string, now time.Time) client.Task {
	n := int(s.claimed.Add(1) - 1)
	return s.task(fmt.Sprintf("%s-%d", jobID, n), n, 1, client.TaskLeased, worker, now)
}

func (s *server) claim(w http.ResponseWriter, r *http.Request) {
	var req claimRequest
	if !decode(w, r, &req) {
		return
	}
	now := time.Now().UTC()
	if req.MaxTasks == 0 {
		writeJSON(w, http.StatusOK, s.next(req.WorkerID, now))
		return
	}
	tasks := make([]client.Task, req.MaxTasks)
	for i := range tasks {
		tasks[i] = s.next(req.WorkerID, now)
	}
	writeJSON(w, http.StatusOK, map[string]any{"tasks": tasks})
}

func (s *server) result(w http.ResponseWriter, r *http.Request) {
	var res client.Result
	if !decode(w, r, &res) {
		return
	}
	s.done.Add(1)
	writeJSON(w, http.StatusOK, s.task(r.PathValue("id"), 0, res.Attempt, client.TaskCompleted, res.WorkerID, time.Now().UTC()))
}

func (s *server) results(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Results []client.Result `json:"results"`
	}
	if !decode(w, r, &req) {
		return
	}
	type status struct {
		TaskID string `json:"task_id"`
		Status int    `json:"status"`
		Error  any    `json:"error"`
	}
	out := make([]status, len(req.Results))
	for i, res := range req.Results {
		s.done.Add(1)
		out[i] = status{TaskID: res.TaskID, Status: http.StatusOK}
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": out})
}
