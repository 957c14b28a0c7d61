package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
)

func (s *Server) getTask(w http.ResponseWriter, r *http.Request) {
	v, err := s.engine.GetTask(r.Context(), r.PathValue("task_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, taskView(v))
}

type claimRequest struct {
	WorkerID         string            `json:"worker_id"`
	Workloads        []string          `json:"workloads"`
	WorkloadVersions map[string]string `json:"workload_versions"`
	WaitSeconds      float64           `json:"wait_seconds"`
	MaxTasks         *int              `json:"max_tasks"`
}

func (s *Server) claim(w http.ResponseWriter, r *http.Request) {
	var req claimRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.WaitSeconds < 0 || req.WaitSeconds > engine.MaxClaimWait.Seconds() {
		s.writeError(w, r, domain.Invalidf("wait_seconds is %v; it must be between 0 and 60", req.WaitSeconds))
		return
	}
	max := orDefault(req.MaxTasks, 1)
	if req.MaxTasks != nil && max == 0 {
		s.writeError(w, r, domain.Invalidf("max_tasks is 0; it must be between 1 and %d", engine.MaxClaimTasks))
		return
	}
	tasks, err := s.engine.ClaimTasks(r.Context(), engine.ClaimTasksParams{
		WorkerID: req.WorkerID, Workloads: req.Workloads, Versions: req.WorkloadVersions, Max: max,
		Wait: time.Duration(req.WaitSeconds * float64(time.Second)),
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(tasks) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if max == 1 {
		writeJSON(w, http.StatusOK, taskView(tasks[0]))
		return
	}
	out := struct {
		Tasks []*taskJSON `json:"tasks"`
	}{Tasks: make([]*taskJSON, len(tasks))}
	for i, t := range tasks {
		out.Tasks[i] = taskView(t)
	}
	writeJSON(w, http.StatusOK, out)
}

// leaseRequest names the lease a worker write is for.
type leaseRequest struct {
	WorkerID string `json:"worker_id"`
	Attempt  int    `json:"attempt"`
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) {
	var req leaseRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	expires, err := s.engine.RenewLease(r.Context(), r.PathValue("task_id"), req.WorkerID, req.Attempt)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]time.Time{"lease_expires_at": expires})
}

type resultRequest struct {
	TaskID          string          `json:"task_id,omitempty"` // batch form only
	WorkerID        string          `json:"worker_id"`
	Attempt         int             `json:"attempt"`
	Output          *string         `json:"output"`
	Metrics         json.RawMessage `json:"metrics"`
	WorkloadVersion string          `json:"workload_version"`
}

func (req *resultRequest) params(taskID string) (engine.CompleteTaskParams, error) {
	if req.Output == nil {
		return engine.CompleteTaskParams{}, domain.Invalidf("output is required: the chunk's top-K rows as CSV text with a header")
	}
	metrics := req.Metrics
	if string(metrics) == "null" {
		metrics = nil
	}
	return engine.CompleteTaskParams{
		TaskID: taskID, WorkerID: req.WorkerID, Attempt: req.Attempt,
		Output: []byte(*req.Output), Metrics: metrics, Version: req.WorkloadVersion,
	}, nil
}

func (s *Server) result(w http.ResponseWriter, r *http.Request) {
	var req resultRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.TaskID != "" {
		s.writeError(w, r, domain.Invalidf("unknown field \"task_id\"; the task is named by the path"))
		return
	}
	p, err := req.params(r.PathValue("task_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v, err := s.engine.CompleteTask(r.Context(), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, taskView(v))
}

type batchResultItem struct {
	TaskID string    `json:"task_id"`
	Status int       `json:"status"`
	Error  *apiError `json:"error"`
}

func (s *Server) batchResults(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Results []resultRequest `json:"results"`
	}
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(req.Results) == 0 || len(req.Results) > engine.MaxBatchResults {
		s.writeError(w, r, domain.Invalidf("results has %d items; send 1 to %d", len(req.Results), engine.MaxBatchResults))
		return
	}
	out := make([]batchResultItem, len(req.Results))
	var params []engine.CompleteTaskParams
	var at []int
	for i, item := range req.Results {
		out[i].TaskID = item.TaskID
		p, err := item.params(item.TaskID)
		if err == nil && item.TaskID == "" {
			err = domain.Invalidf("results[%d].task_id is required", i)
		}
		if err != nil {
			out[i].Status, out[i].Error = toAPIError(r, s.log, err)
			continue
		}
		params = append(params, p)
		at = append(at, i)
	}
	for k, res := range s.engine.CompleteTasks(r.Context(), params) {
		i := at[k]
		if res.Err != nil {
			out[i].Status, out[i].Error = toAPIError(r, s.log, res.Err)
			continue
		}
		out[i].Status = http.StatusOK
	}
	writeJSON(w, http.StatusOK, struct {
		Results []batchResultItem `json:"results"`
	}{out})
}

type failureRequest struct {
	WorkerID  string `json:"worker_id"`
	Attempt   int    `json:"attempt"`
	Error     string `json:"error"`
	Retryable *bool  `json:"retryable"`
	Release   bool   `json:"release"`
}

func (s *Server) failure(w http.ResponseWriter, r *http.Request) {
	var req failureRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Release && req.Retryable != nil && !*req.Retryable {
		s.writeError(w, r, domain.Invalidf("release gives the task back to run again; it cannot be retryable: false"))
		return
	}
	v, err := s.engine.FailTask(r.Context(), engine.FailTaskParams{
		TaskID: r.PathValue("task_id"), WorkerID: req.WorkerID, Attempt: req.Attempt,
		Error: req.Error, Retryable: req.Retryable == nil || *req.Retryable, Release: req.Release,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, taskView(v))
}
