package httpapi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
)

// DefaultMaxUploadBytes is the largest upload a Server takes unless told otherwise.
const DefaultMaxUploadBytes = 64 << 30

func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	u, err := s.engine.CreateUpload(r.Context(), r.Body, r.ContentLength) // bounded by the gate at maxUpload
	if err != nil {
		var over *http.MaxBytesError
		var slow *auth.SlowBodyError
		switch {
		case errors.As(err, &over):
			err = fmt.Errorf("%s: %w", uploadTooLarge(over.Limit), domain.ErrTooLarge)
		case errors.As(err, &slow):
			err = bodyError(err)
		case errors.Is(err, domain.ErrQuotaExceeded):
			auth.LetGo(w, r) // what is left of the body will not be read
		}
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"upload_id": u.ID, "bytes": u.Bytes, "sha256": u.SHA256, "rows": u.Rows,
	})
}

// uploadTooLarge says what to do about an upload over limit.
func uploadTooLarge(limit int64) string {
	return fmt.Sprintf("the upload is over this coordinator's limit of %d bytes; split the table or ask the operator to raise SCIMESH_MAX_UPLOAD_BYTES", limit)
}

// denyUpload is Deny, with a declared upload over the bound told what to do.
func (s *Server) denyUpload(w http.ResponseWriter, r *http.Request, e *auth.Error) {
	if e.Status == http.StatusRequestEntityTooLarge {
		e = &auth.Error{Status: e.Status, Code: e.Code, Message: uploadTooLarge(s.maxUpload)}
	}
	Deny(w, r, e)
}

// taskInput serves a chunk's input; a HEAD answers from the task's record
// without reading the blob store.
func (s *Server) taskInput(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("task_id")
	if r.Method == http.MethodHead {
		info, err := s.engine.StatTaskInput(r.Context(), id)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		inputHeaders(w.Header(), info)
		return
	}
	in, err := s.engine.OpenTaskInput(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer in.Close()
	inputHeaders(w.Header(), in.TaskInputInfo)
	if _, err := io.Copy(w, in); err != nil {
		s.log.WarnContext(r.Context(), "task input cut short", "task_id", id, "error", err)
	}
}

// inputHeaders are the headers of a chunk's input.
func inputHeaders(h http.Header, info engine.TaskInputInfo) {
	h.Set("Content-Type", "text/csv; charset=utf-8")
	h.Set("Content-Length", strconv.FormatInt(info.Size, 10))
	h.Set("X-Content-SHA256", info.SHA256)
	h.Set("ETag", `"sha256:`+info.SHA256+`"`)
}

type logsRequest struct {
	WorkerID string   `json:"worker_id"`
	Attempt  int      `json:"attempt"`
	Offset   *int64   `json:"offset"` // position of lines[0] among the attempt's lines; makes a resend harmless
	Lines    []string `json:"lines"`
}

func (s *Server) appendLogs(w http.ResponseWriter, r *http.Request) {
	var req logsRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	err := s.engine.AppendLogs(r.Context(), engine.AppendLogsParams{
		TaskID: r.PathValue("task_id"), WorkerID: req.WorkerID, Attempt: req.Attempt, Lines: req.Lines, Offset: req.Offset,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// logs serves a task's log as text, one line per line, with a marker line
// where a new attempt starts. With ?follow=1 it keeps the response open and
// sends new lines as they arrive, until the task is final.
func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	follow := false
	switch v := r.URL.Query().Get("follow"); v {
	case "", "0", "false":
	case "1", "true":
		follow = true
	default:
		s.writeError(w, r, domain.Invalidf("follow %q must be 1 or 0", v))
		return
	}
	id := r.PathValue("task_id")
	ctx := r.Context()
	bw := bufio.NewWriter(w)
	started := false
	attempt := 0
	err := s.engine.FollowLogs(ctx, id, follow, func(lines []domain.LogLine) error {
		if !started { // the task exists: answer
			started = true
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			if follow {
				w.Header().Set("Cache-Control", "no-cache")
			}
			w.WriteHeader(http.StatusOK)
		}
		for _, l := range lines {
			if l.Attempt != attempt {
				attempt = l.Attempt
				fmt.Fprintf(bw, "--- attempt %d ---\n", attempt)
			}
			bw.WriteString(l.Line)
			bw.WriteByte('\n')
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		if follow {
			return http.NewResponseController(w).Flush()
		}
		return nil
	})
	switch {
	case !started:
		s.writeError(w, r, err)
	case err != nil && ctx.Err() == nil:
		s.log.WarnContext(ctx, "log stream ended by an error", "task_id", id, "error", err)
	}
}
