package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
)

// The new-job page: a CSV file is uploaded as soon as it is chosen
// (POST /ui/upload, with its progress shown), then the form creates a job
// over it (POST /ui/jobs/new) for the signed-in account and opens the
// job's page. A form refused is shown again with what was wrong, and the
// file uploaded is kept for the next try.

// jobForm is what the new-job form holds, as typed.
type jobForm struct {
	UploadID, UploadName, Rows          string // the file uploaded, its name and its rows
	Name, Workload, Parameters          string
	TopK, ChunkRows, ScoreColumn, Order string
	Workers, Quorum                     string // who may run the chunks; for "any", the quorum
}

type newJobData struct {
	Form      jobForm
	Workloads []*engine.WorkloadView
	Window    string
	MaxUpload string
	Quorums   []int // the quorums a job may ask for
	Error     string
}

// newJobDefaults is the form as first shown: the job settings' defaults.
var newJobDefaults = jobForm{
	TopK: strconv.Itoa(domain.DefaultTopK), ChunkRows: strconv.Itoa(domain.DefaultChunkRows),
	ScoreColumn: domain.DefaultScoreColumn, Order: string(domain.Desc),
	Workers: string(domain.WorkersTrusted), Quorum: strconv.Itoa(domain.DefaultQuorum),
}

func (u *UI) newJob(w http.ResponseWriter, r *http.Request) {
	u.renderNewJob(w, r, 0, newJobDefaults, "")
}

// renderNewJob shows the new-job form holding f, with msg (when not "")
// saying what was wrong with it.
func (u *UI) renderNewJob(w http.ResponseWriter, r *http.Request, status int, f jobForm, msg string) {
	ws, err := u.e.ListWorkloads(r.Context())
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.render(w, r, status, "newjob", "New job", "jobs", newJobData{Form: f, Workloads: ws, Error: msg,
		Window: fmt.Sprintf("%d minutes", int(engine.WorkersWindow.Minutes())), MaxUpload: domain.SizeText(u.cfg.MaxUpload),
		Quorums: []int{1, 2, 3, 4, 5}})
}

// createJob creates the job the form describes and opens its page.
func (u *UI) createJob(w http.ResponseWriter, r *http.Request) {
	v := r.PostForm.Get
	f := jobForm{UploadID: v("upload_id"), UploadName: v("upload_name"), Rows: v("rows"), Name: v("name"),
		Workload: strings.TrimSpace(v("workload")), Parameters: v("parameters"), TopK: v("top_k"),
		ChunkRows: v("chunk_rows"), ScoreColumn: v("score_column"), Order: v("order"),
		Workers: v("workers"), Quorum: v("quorum")}
	spec, err := f.spec()
	var j *engine.JobView
	if err == nil {
		j, _, err = u.e.CreateJob(r.Context(), spec, "")
	}
	if err != nil {
		status, msg := u.explain(r, err)
		u.renderNewJob(w, r, status, f, msg)
		return
	}
	u.log.InfoContext(r.Context(), "job created from the dashboard", "job_id", j.ID, "owner", j.Owner)
	http.Redirect(w, r, "/ui/jobs/"+url.PathEscape(j.ID), http.StatusSeeOther)
}

// spec is the job f describes; what the form cannot hold wrong is
// ErrInvalidArgument, the rest is for the engine to judge.
func (f *jobForm) spec() (*domain.JobSpec, error) {
	if f.UploadID == "" {
		return nil, domain.Invalidf("choose a CSV file, and wait until it has uploaded")
	}
	if f.Workload == "" {
		return nil, domain.Invalidf("choose a workload")
	}
	params, err := domain.ParseParameterText(f.Parameters)
	if err != nil {
		return nil, err
	}
	if params == nil {
		params = json.RawMessage("{}")
	}
	topK, err := formInt("top_k", f.TopK, domain.DefaultTopK)
	if err != nil {
		return nil, err
	}
	chunkRows, err := formInt("chunk_rows", f.ChunkRows, domain.DefaultChunkRows)
	if err != nil {
		return nil, err
	}
	score := strings.TrimSpace(f.ScoreColumn)
	if score == "" {
		score = domain.DefaultScoreColumn
	}
	order := domain.Order(f.Order)
	if order == "" {
		order = domain.Desc
	}
	s := &domain.JobSpec{
		Name: strings.TrimSpace(f.Name), Workload: f.Workload, Parameters: params, UploadID: f.UploadID,
		ChunkRows: chunkRows, HasHeader: true, TopK: topK, ScoreColumn: score, Order: order,
		MaxAttempts: domain.DefaultMaxAttempts, LeaseSeconds: domain.DefaultLeaseSeconds,
	}
	// As the REST API stores them: the default mode as "", a quorum for
	// "any" alone (see domain.JobSpec).
	if w := domain.WorkerMode(f.Workers); w != domain.WorkersTrusted {
		s.Workers = w
	}
	if s.Workers == domain.WorkersAny {
		if s.Quorum, err = formInt("quorum", f.Quorum, domain.DefaultQuorum); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// formInt reads the whole number of field name, def when left empty.
func formInt(name, s string, def int) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, domain.Invalidf("%s %q is not a whole number", name, s)
	}
	return n, nil
}

// upload stores the CSV file in the request's body, as POST /upload
// does, for the signed-in account, and answers its upload_id, bytes,
// sha256 and rows as JSON; or what was wrong as text.
func (u *UI) upload(w http.ResponseWriter, r *http.Request) {
	up, err := u.e.CreateUpload(r.Context(), r.Body, r.ContentLength) // bounded by the gate at MaxUpload
	if err != nil {
		status, msg := u.explain(r, err)
		if status == http.StatusTooManyRequests || status == http.StatusRequestEntityTooLarge {
			auth.LetGo(w, r) // what is left of the body will not be read
		}
		http.Error(w, msg, status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"upload_id": up.ID, "bytes": up.Bytes, "sha256": up.SHA256, "rows": up.Rows})
}
