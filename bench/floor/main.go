// Command floor is the HTTP floor of bench/load.sh's REST forms: a server
// that answers the calls `scimesh bench --coordinator` makes (POST /jobs,
// POST /tasks/claim, POST /tasks/{id}/result, POST /tasks/results, GET
// /jobs/{id}) with bodies like a coordinator's, checking the bearer token
// and decoding and encoding JSON with the standard library as serve does,
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
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// task is a claimed (or completed) task as a coordinator writes it.
type task struct {
	TaskID         string          `json:"task_id"`
	JobID          string          `json:"job_id"`
	ChunkIndex     int64           `json:"chunk_index"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"max_attempts"`
	LeaseExpiresAt *time.Time      `json:"lease_expires_at"`
	Workload       string          `json:"workload"`
	Parameters     json.RawMessage `json:"parameters"`
	TopK           int             `json:"top_k"`
	ScoreColumn    string          `json:"score_column"`
	Order          string          `json:"order"`
	HasHeader      bool            `json:"has_header"`
	TimeoutSeconds int             `json:"timeout_seconds"`
	Input          struct {
		URL    string `json:"url"`
		SHA256 string `json:"sha256"`
		Bytes  int64  `json:"bytes"`
	} `json:"input"`
	State      string    `json:"state"`
	LeaseOwner string    `json:"lease_owner"`
	Error      *string   `json:"error"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

type claimRequest struct {
	WorkerID    string   `json:"worker_id"`
	Workloads   []string `json:"workloads"`
	MaxTasks    int      `json:"max_tasks"`
	WaitSeconds float64  `json:"wait_seconds"`
}

type result struct {
	TaskID   string          `json:"task_id"`
	WorkerID string          `json:"worker_id"`
	Attempt  int             `json:"attempt"`
	Output   string          `json:"output"`
	Metrics  json.RawMessage `json:"metrics"`
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
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<20)).Decode(v); err != nil {
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

// next is the n-th task as claimed by worker.
func (s *server) next(worker string, now time.Time) task {
	n := s.claimed.Add(1) - 1
	expires := now.Add(10 * time.Minute)
	t := task{
		TaskID: fmt.Sprintf("%s-%d", jobID, n), JobID: jobID, ChunkIndex: n, Attempt: 1, MaxAttempts: 3,
		LeaseExpiresAt: &expires, Workload: s.workload.Load().(string), Parameters: json.RawMessage("{}"), TopK: 1,
		ScoreColumn: "score", Order: "desc", HasHeader: true, State: "leased", LeaseOwner: worker,
		CreatedAt: s.created, UpdatedAt: now,
	}
	t.Input.URL = fmt.Sprintf("https://bench.invalid/%d", n)
	t.Input.SHA256 = strings.Repeat("0", 64)
	return t
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
	tasks := make([]task, req.MaxTasks)
	for i := range tasks {
		tasks[i] = s.next(req.WorkerID, now)
	}
	writeJSON(w, http.StatusOK, map[string]any{"tasks": tasks})
}

// completed is the task of r as a coordinator answers a result.
func (s *server) completed(id string, r result, now time.Time) task {
	s.done.Add(1)
	t := task{TaskID: id, JobID: jobID, Attempt: r.Attempt, MaxAttempts: 3, Workload: s.workload.Load().(string),
		Parameters: json.RawMessage("{}"), TopK: 1, ScoreColumn: "score", Order: "desc", HasHeader: true,
		State: "completed", LeaseOwner: r.WorkerID, CreatedAt: s.created, UpdatedAt: now}
	t.Input.URL = "https://bench.invalid/0"
	t.Input.SHA256 = strings.Repeat("0", 64)
	return t
}

func (s *server) result(w http.ResponseWriter, r *http.Request) {
	var res result
	if !decode(w, r, &res) {
		return
	}
	writeJSON(w, http.StatusOK, s.completed(r.PathValue("id"), res, time.Now().UTC()))
}

func (s *server) results(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Results []result `json:"results"`
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
