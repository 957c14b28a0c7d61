package httpapi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
)

// DefaultMaxUploadBytes is the largest upload a Server takes unless told otherwise.
const DefaultMaxUploadBytes = 64 << 30

func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	body := http.MaxBytesReader(w, r.Body, s.MaxUploadBytes)
	u, err := s.engine.Upload(r.Context(), body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			err = fmt.Errorf("the upload is over this coordinator's limit of %d bytes; split the table or ask the operator to raise SCIMESH_MAX_UPLOAD_BYTES: %w",
				s.MaxUploadBytes, domain.ErrTooLarge)
		}
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"upload_id": u.ID, "bytes": u.Bytes, "sha256": u.SHA256, "rows": u.Rows,
	})
}

func (s *Server) taskInput(w http.ResponseWriter, r *http.Request) {
	in, err := s.engine.OpenTaskInput(r.Context(), r.PathValue("task_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer in.Close()
	h := w.Header()
	h.Set("Content-Type", "text/csv; charset=utf-8")
	h.Set("Content-Length", strconv.FormatInt(in.Size, 10))
	h.Set("X-Content-SHA256", in.SHA256)
	h.Set("ETag", `"sha256:`+in.SHA256+`"`)
	if r.Method == http.MethodHead {
		return
	}
	if _, err := io.Copy(w, in); err != nil {
		s.log.WarnContext(r.Context(), "task input cut short", "task_id", r.PathValue("task_id"), "error", err)
	}
}

type logsRequest struct {
	WorkerID string   `json:"worker_id"`
	Attempt  int      `json:"attempt"`
	Lines    []string `json:"lines"`
}

func (s *Server) appendLogs(w http.ResponseWriter, r *http.Request) {
	var req logsRequest
	if err := decode(w, r, largeBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	err := s.engine.AppendLogs(r.Context(), engine.AppendLogsParams{
		TaskID: r.PathValue("task_id"), WorkerID: req.WorkerID, Attempt: req.Attempt, Lines: req.Lines,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// logPage is how many lines one read of a log takes.
const logPage = 1000

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
	page, err := s.engine.Logs(ctx, id, 0, logPage)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if follow {
		w.Header().Set("Cache-Control", "no-cache")
	}
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	flusher, _ := w.(http.Flusher)
	var after int64
	attempt := 0
	for {
		for _, l := range page.Lines {
			if l.Attempt != attempt {
				attempt = l.Attempt
				fmt.Fprintf(bw, "--- attempt %d ---\n", attempt)
			}
			bw.WriteString(l.Line)
			bw.WriteByte('\n')
			after = l.ID
		}
		full := len(page.Lines) == logPage
		if !full && (!follow || page.Final) {
			bw.Flush()
			return
		}
		if !full {
			if err := bw.Flush(); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
			s.engine.WaitLogs(ctx, 500*time.Millisecond)
			if ctx.Err() != nil {
				return
			}
		}
		if page, err = s.engine.Logs(ctx, id, after, logPage); err != nil {
			s.log.WarnContext(ctx, "log stream ended by an error", "task_id", id, "error", err)
			bw.Flush()
			return
		}
	}
}
