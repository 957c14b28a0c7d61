package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/scimesh/scimesh/internal/domain"
)

// errorBody is the JSON shape of every error: {"error": {"code", "message"}}.
type errorBody struct {
	Error *apiError `json:"error"`
}

// apiError is one error as clients see it.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// errorMap maps the domain's sentinels to status and code, first match wins.
var errorMap = []struct {
	err    error
	status int
	code   string
}{
	{domain.ErrInvalidArgument, http.StatusBadRequest, "invalid_argument"},
	{domain.ErrNotFound, http.StatusNotFound, "not_found"},
	{domain.ErrLeaseLost, http.StatusConflict, "lease_lost"},
	{domain.ErrCancelled, http.StatusConflict, "cancelled"},
	{domain.ErrNotReady, http.StatusConflict, "not_ready"},
	{domain.ErrConflict, http.StatusConflict, "conflict"},
	{domain.ErrPermissionDenied, http.StatusForbidden, "permission_denied"},
	{domain.ErrTooLarge, http.StatusRequestEntityTooLarge, "too_large"},
	{domain.ErrQuotaExceeded, http.StatusTooManyRequests, "quota_exceeded"},
	{domain.ErrBusy, http.StatusServiceUnavailable, "unavailable"},
	{domain.ErrUnavailable, http.StatusServiceUnavailable, "unavailable"},
}

// toAPIError turns err into the status and error object a client sees.
// Anything unexpected is a 500 whose message leaks nothing; it is logged.
func toAPIError(r *http.Request, log *slog.Logger, err error) (int, *apiError) {
	for _, m := range errorMap {
		if errors.Is(err, m.err) {
			msg := err.Error()
			if m.err == domain.ErrUnavailable {
				log.WarnContext(r.Context(), "unavailable", "method", r.Method, "path", r.URL.Path, "error", err)
				msg = "the database is not answering; retry later"
			}
			return m.status, &apiError{Code: m.code, Message: msg}
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return http.StatusServiceUnavailable, &apiError{Code: "unavailable", Message: "the request was cut short; retry it"}
	}
	log.ErrorContext(r.Context(), "internal error", "method", r.Method, "path", r.URL.Path, "error", err)
	return http.StatusInternalServerError, &apiError{Code: "internal", Message: "internal error; the server logged the details"}
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, e := toAPIError(r, s.log, err)
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, errorBody{Error: e})
}

func writeAPIError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Error: &apiError{Code: code, Message: msg}})
}
