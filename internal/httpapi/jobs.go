package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
)

// createJobRequest is the body of POST /jobs; pointers tell absent fields,
// which take their defaults, from given ones.
type createJobRequest struct {
	Name           *string         `json:"name"`
	Workload       string          `json:"workload"`
	Parameters     json.RawMessage `json:"parameters"`
	Input          *inputRequest   `json:"input"`
	ChunkRows      *int            `json:"chunk_rows"`
	HasHeader      *bool           `json:"has_header"`
	TopK           *int            `json:"top_k"`
	ScoreColumn    *string         `json:"score_column"`
	Order          *string         `json:"order"`
	MaxAttempts    *int            `json:"max_attempts"`
	LeaseSeconds   *int            `json:"lease_seconds"`
	Priority       *int            `json:"priority"`
	TimeoutSeconds *int            `json:"timeout_seconds"`
	Workers        *string         `json:"workers"`
	Quorum         *int            `json:"quorum"`
	Columns        []string        `json:"columns"`
	IDColumn       *string         `json:"id_column"`
	Cache          *bool           `json:"cache"`
	SpeculateAfter *float64        `json:"speculate_after"`
}

type inputRequest struct {
	UploadID *string        `json:"upload_id"`
	Chunks   []chunkRequest `json:"chunks"`
}

type chunkRequest struct {
	URI    string `json:"uri"`
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
}

// spec applies the defaults of the contract.
func (r *createJobRequest) spec() (*domain.JobSpec, error) {
	s := &domain.JobSpec{
		Workload:       r.Workload,
		Parameters:     r.Parameters,
		ChunkRows:      orDefault(r.ChunkRows, domain.DefaultChunkRows),
		HasHeader:      r.HasHeader == nil || *r.HasHeader,
		TopK:           orDefault(r.TopK, domain.DefaultTopK),
		ScoreColumn:    orDefault(r.ScoreColumn, domain.DefaultScoreColumn),
		Order:          domain.Order(orDefault(r.Order, string(domain.Desc))),
		MaxAttempts:    orDefault(r.MaxAttempts, domain.DefaultMaxAttempts),
		LeaseSeconds:   orDefault(r.LeaseSeconds, domain.DefaultLeaseSeconds),
		Priority:       orDefault(r.Priority, 0),
		Name:           orDefault(r.Name, ""),
		TimeoutSeconds: orDefault(r.TimeoutSeconds, 0), // no timeout
		Quorum:         orDefault(r.Quorum, 0),
		NoCache:        !orDefault(r.Cache, true),
		SpeculateAfter: r.SpeculateAfter,
	}
	// The default mode is stored as "", and only "any" has a quorum (see
	// domain.JobSpec).
	if w := domain.WorkerMode(orDefault(r.Workers, "")); w != domain.WorkersTrusted {
		s.Workers = w
	}
	if s.Workers == domain.WorkersAny && r.Quorum == nil {
		s.Quorum = domain.DefaultQuorum
	}
	// Only a job that joins columns has an id column (see domain.JobSpec).
	if len(r.Columns) > 0 {
		s.Columns, s.IDColumn = r.Columns, orDefault(r.IDColumn, domain.DefaultIDColumn)
	} else if r.IDColumn != nil {
		s.IDColumn = *r.IDColumn
	}
	if len(s.Parameters) == 0 || string(s.Parameters) == "null" {
		s.Parameters = json.RawMessage("{}")
	}
	switch {
	case r.Input == nil:
		return nil, domain.Invalidf(`input is required: {"upload_id": "…"} or {"chunks": [{"uri": "…", "sha256": "…"}]}`)
	case r.Input.UploadID != nil && r.Input.Chunks != nil:
		return nil, domain.Invalidf("input takes upload_id or chunks, not both")
	case r.Input.UploadID != nil:
		if *r.Input.UploadID == "" {
			return nil, domain.Invalidf("input.upload_id is empty; send the upload_id that POST /upload returned")
		}
		s.UploadID = *r.Input.UploadID
		return s, nil
	}
	for _, c := range r.Input.Chunks {
		s.Chunks = append(s.Chunks, domain.ChunkRef{URI: c.URI, SHA256: c.SHA256, Bytes: c.Bytes})
	}
	return s, nil
}

func orDefault[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func (s *Server) createJob(w http.ResponseWriter, r *http.Request) {
	var req createJobRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	spec, err := req.spec()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v, created, err := s.engine.CreateJob(r.Context(), spec, r.Header.Get("Idempotency-Key"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	w.Header().Set("Location", "/jobs/"+v.ID)
	writeJSON(w, status, jobView(v))
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), "limit")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	jobs, next, err := s.engine.ListJobs(r.Context(), engine.ListJobsParams{
		Owner: q.Get("owner"), Status: domain.JobStatus(q.Get("status")), Limit: limit, Cursor: q.Get("cursor"),
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := struct {
		Jobs       []*jobJSON `json:"jobs"`
		NextCursor *string    `json:"next_cursor"`
	}{Jobs: make([]*jobJSON, len(jobs)), NextCursor: strPtr(next)}
	for i, j := range jobs {
		out.Jobs[i] = jobView(j)
	}
	writeJSON(w, http.StatusOK, out)
}

func intParam(s, name string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, domain.Invalidf("%s %q is not an integer", name, s)
	}
	if n == 0 {
		return 0, domain.Invalidf("%s is 0; it must be between 1 and 1000", name)
	}
	return n, nil
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	wait := 0
	if ws := q.Get("wait_seconds"); ws != "" {
		n, err := strconv.Atoi(ws)
		if err != nil || n < 0 || n > int(engine.MaxJobWait/time.Second) {
			s.writeError(w, r, domain.Invalidf("wait_seconds %q must be an integer between 0 and %d", ws, int(engine.MaxJobWait/time.Second)))
			return
		}
		wait = n
	}
	v, err := s.engine.WaitJob(r.Context(), r.PathValue("job_id"), q.Get("after"), time.Duration(wait)*time.Second)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, jobView(v))
}

func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), "limit")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tasks, next, err := s.engine.ListTasks(r.Context(), engine.ListTasksParams{
		JobID: r.PathValue("job_id"), State: domain.TaskState(q.Get("state")), Limit: limit, Cursor: q.Get("cursor"),
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := struct {
		Tasks      []*taskJSON `json:"tasks"`
		NextCursor *string     `json:"next_cursor"`
	}{Tasks: make([]*taskJSON, len(tasks)), NextCursor: strPtr(next)}
	for i, t := range tasks {
		out.Tasks[i] = taskView(t)
	}
	writeJSON(w, http.StatusOK, out)
}

// jobResult serves a completed job's final CSV, read from the store a piece
// at a time (engine.ResultStream); an error once the headers are out cuts
// the body short of its Content-Length.
func (s *Server) jobResult(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	if p := r.URL.Query().Get("partial"); p != "" {
		partial, err := strconv.ParseBool(p)
		if err != nil {
			s.writeError(w, r, domain.Invalidf("partial is %q; it must be true or false", p))
			return
		}
		if partial {
			peek, err := s.engine.PeekJobResult(r.Context(), r.PathValue("job_id"), 0)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			h.Set("SciMesh-Chunks-Done", strconv.Itoa(peek.ChunksDone))
			h.Set("SciMesh-Chunks-Total", strconv.Itoa(peek.ChunksTotal))
			if !peek.Completed {
				h.Set("Content-Type", "text/csv; charset=utf-8")
				h.Set("Cache-Control", "no-store")
				h.Set("Content-Length", strconv.Itoa(len(peek.CSV)))
				w.WriteHeader(http.StatusOK)
				if r.Method != http.MethodHead {
					w.Write(peek.CSV)
				}
				return
			}
		}
	}
	res, err := s.engine.OpenJobResult(r.Context(), r.PathValue("job_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h.Set("Content-Type", "text/csv; charset=utf-8")
	if res.SHA256 != "" {
		h.Set("ETag", `"sha256:`+res.SHA256+`"`)
	}
	http.ServeContent(w, r, "", time.Time{}, res) // length, HEAD, ranges, If-None-Match
}

func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) {
	if err := decodeOptional(r, &struct{}{}); err != nil { // no fields: the path says it all
		s.writeError(w, r, err)
		return
	}
	v, err := s.engine.CancelJob(r.Context(), r.PathValue("job_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, jobView(v))
}

func (s *Server) retryJob(w http.ResponseWriter, r *http.Request) {
	if err := decodeOptional(r, &struct{}{}); err != nil { // no fields, as for cancel
		s.writeError(w, r, err)
		return
	}
	v, err := s.engine.RetryJob(r.Context(), r.PathValue("job_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, jobView(v))
}
