package ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
)

var jobStatuses = []domain.JobStatus{domain.JobPending, domain.JobRunning, domain.JobCompleted, domain.JobFailed, domain.JobCancelled}

var taskStates = []domain.TaskState{domain.TaskPending, domain.TaskLeased, domain.TaskCompleted, domain.TaskFailed, domain.TaskCancelled}

type jobsData struct {
	Jobs     []*engine.JobView
	Status   string
	Statuses []domain.JobStatus
	Next     string
}

func (u *UI) jobs(w http.ResponseWriter, r *http.Request) {
	status := r.URL.Query().Get("status")
	jobs, next, err := u.e.ListJobs(r.Context(), engine.ListJobsParams{Status: domain.JobStatus(status), Limit: 50, Cursor: r.URL.Query().Get("cursor")})
	if err != nil {
		u.fail(w, r, err)
		return
	}
	if next != "" {
		next = "/ui/jobs?" + url.Values{"status": {status}, "cursor": {next}}.Encode()
	}
	u.render(w, r, 0, "jobs", "Jobs", "jobs", jobsData{Jobs: jobs, Status: status, Statuses: jobStatuses, Next: next})
}

type jobData struct {
	Job    *engine.JobView
	Tasks  []*engine.TaskView
	State  string
	States []domain.TaskState
	Next   string
	Chart  *chart
	Best   *bestRows
}

func (u *UI) job(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	j, err := u.e.GetJob(ctx, id)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	state := r.URL.Query().Get("state")
	tasks, next, err := u.e.ListTasks(ctx, engine.ListTasksParams{JobID: id, State: domain.TaskState(state), Limit: 100, Cursor: r.URL.Query().Get("cursor")})
	if err != nil {
		u.fail(w, r, err)
		return
	}
	if next != "" {
		next = "/ui/jobs/" + url.PathEscape(id) + "?" + url.Values{"state": {state}, "cursor": {next}}.Encode()
	}
	c, err := u.chart(r, j)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	best, err := u.best(r, id)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.render(w, r, 0, "job", "Job "+id, "jobs", jobData{Job: j, Tasks: tasks, State: state, States: taskStates,
		Next: next, Chart: c, Best: best})
}

// progressEvent is what a job page's live view receives.
type progressEvent struct {
	Status   string            `json:"status"`
	Progress float64           `json:"progress"`
	Percent  string            `json:"percent"`
	Tasks    domain.TaskCounts `json:"tasks"`
	Final    bool              `json:"final"`
	Chart    string            `json:"chart"` // the chart's points
	Caption  string            `json:"caption"`
	XTicks   []tick            `json:"xticks"` // the time axis, which grows with the job
	XTitle   string            `json:"xtitle"`
	Best     *bestRows         `json:"best"` // the best rows so far, drawn with the chart
}

// Live views look for changes every pollEvery and redraw a job's chart
// at most every chartEvery: its data grows with the job's chunks.
const (
	pollEvery  = time.Second
	chartEvery = 5 * time.Second
)

// jobEvents streams a job's progress as Server-Sent Events, one "progress"
// event per change, until the job is final; then a "done" event.
func (u *UI) jobEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	release, err := u.e.HoldStream()
	if err != nil {
		busy(w, err)
		return
	}
	defer release()
	sse, ok := startEvents(w)
	if !ok {
		return
	}
	var last progressEvent
	sent := ""            // last, as sent
	var charted time.Time // when the chart was last drawn
	chartDone := -1       // the completed chunks it shows
	for {
		j, err := u.e.GetJob(r.Context(), id)
		if err != nil {
			u.streamFailed(sse, r, err)
			return
		}
		ev := progressEvent{Status: string(j.Status), Progress: j.Tasks.Progress(), Percent: fmt.Sprintf("%.0f%%", j.Tasks.Progress()*100),
			Tasks: j.Tasks, Final: j.Status.Final(), Chart: last.Chart, Caption: last.Caption, XTicks: last.XTicks, XTitle: last.XTitle,
			Best: last.Best}
		if ev.Tasks.Completed != chartDone && (time.Since(charted) >= chartEvery || ev.Final) {
			c, err := u.chart(r, j)
			if err != nil {
				u.streamFailed(sse, r, err)
				return
			}
			best, err := u.best(r, id)
			if err != nil {
				u.streamFailed(sse, r, err)
				return
			}
			ev.Chart, ev.Caption, ev.XTicks, ev.XTitle, ev.Best = c.Points, c.Caption(), c.XTicks, c.XTitle, best
			charted, chartDone = time.Now(), ev.Tasks.Completed
		}
		if b, _ := json.Marshal(ev); string(b) != sent { // sent only when it changed
			if !sse.send("progress", string(b)) {
				return
			}
			last, sent = ev, string(b)
		}
		if ev.Final {
			sse.send("done", "{}")
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(pollEvery):
		}
	}
}

// streamFailed ends a live view: quietly when the client or the server is
// going away (the browser reconnects), else with a "failure" event.
func (u *UI) streamFailed(sse *events, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	_, msg := u.explain(r, err)
	sse.send("failure", msg)
}

// result downloads a completed job's CSV, served as the REST API's GET
// /jobs/{id}/result serves it (engine.ResultStream, http.ServeContent).
func (u *UI) result(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	res, err := u.e.OpenJobResult(r.Context(), id)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", strings.ReplaceAll(id, ":", "_")+".csv"))
	h := w.Header()
	h.Set("Content-Type", "text/csv; charset=utf-8")
	if res.SHA256 != "" {
		h.Set("ETag", `"sha256:`+res.SHA256+`"`)
	}
	http.ServeContent(w, r, "", time.Time{}, res) // length, HEAD, ranges, If-None-Match
}

// cancel cancels a job and goes back to its page.
func (u *UI) cancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := u.e.CancelJob(r.Context(), id); err != nil {
		u.fail(w, r, err)
		return
	}
	u.log.InfoContext(r.Context(), "job cancelled from the dashboard", "job_id", id)
	http.Redirect(w, r, "/ui/jobs/"+url.PathEscape(id), http.StatusSeeOther)
}

// retry runs a failed or cancelled job's unfinished chunks again and goes
// back to its page.
func (u *UI) retry(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := u.e.RetryJob(r.Context(), id); err != nil {
		u.fail(w, r, err)
		return
	}
	u.log.InfoContext(r.Context(), "job retried from the dashboard", "job_id", id)
	http.Redirect(w, r, "/ui/jobs/"+url.PathEscape(id), http.StatusSeeOther)
}

type taskData struct {
	Task      *engine.TaskView
	Upstreams []string
	LeaseLeft string
}

func (u *UI) task(w http.ResponseWriter, r *http.Request) {
	v, err := u.e.GetTask(r.Context(), r.PathValue("id"))
	if err != nil {
		u.fail(w, r, err)
		return
	}
	d := taskData{Task: v}
	if v.Kind == domain.KindTree {
		if d.Upstreams, err = u.e.ListTreeArgs(r.Context(), v.ID); err != nil {
			u.fail(w, r, err)
			return
		}
	}
	if v.State == domain.TaskLeased {
		d.LeaseLeft = age(v.LeaseExpiresAt)
	}
	u.render(w, r, 0, "task", "Task "+v.ID, "jobs", d)
}

// logLine is a line of a task's log as the live view receives it.
type logLine struct {
	Attempt int    `json:"attempt"`
	Line    string `json:"line"`
}

// taskLog streams a task's log as Server-Sent Events: every line there is,
// then new ones as they come ("line" events), until the task is final; then
// a "done" event.
func (u *UI) taskLog(w http.ResponseWriter, r *http.Request) {
	var sse *events
	err := u.e.FollowLogs(r.Context(), r.PathValue("id"), true, func(lines []domain.LogLine) error {
		if sse == nil {
			var ok bool
			if sse, ok = startEvents(w); !ok {
				return errGone
			}
		}
		for _, l := range lines {
			b, _ := json.Marshal(logLine{Attempt: l.Attempt, Line: l.Line})
			if !sse.send("line", string(b)) {
				return errGone
			}
		}
		return nil
	})
	switch {
	case sse == nil && errors.Is(err, domain.ErrBusy):
		busy(w, err)
	case sse == nil: // the task could not be read
		sse, _ = startEvents(w)
		u.streamFailed(sse, r, err)
	case err == nil:
		sse.send("done", "{}")
	case !errors.Is(err, errGone):
		u.streamFailed(sse, r, err)
	}
}

// errGone ends a stream whose client went away.
var errGone = errors.New("the client went away")

// busy refuses a live view when the process holds its maximum of open
// streams; the browser's EventSource tries again after Retry-After.
func busy(w http.ResponseWriter, err error) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, err.Error(), http.StatusServiceUnavailable)
}

// events writes Server-Sent Events.
type events struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startEvents(w http.ResponseWriter) (*events, bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	e := &events{w: w, rc: http.NewResponseController(w)}
	return e, e.rc.Flush() == nil
}

// send writes one event; data must be one line. It reports whether the
// client is still there.
func (e *events) send(name, data string) bool {
	data = strings.NewReplacer("\r", " ", "\n", " ").Replace(data)
	if _, err := fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, data); err != nil {
		return false
	}
	return e.rc.Flush() == nil
}

type workersData struct {
	Workers []*engine.WorkerView
	Window  string
}

func (u *UI) workers(w http.ResponseWriter, r *http.Request) {
	ws, _, err := u.e.ListWorkers(r.Context(), engine.ListWorkersParams{Within: engine.WorkersWindow, Limit: 500, Tasks: true})
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.render(w, r, 0, "workers", "Workers", "workers", workersData{Workers: ws, Window: fmt.Sprintf("%d minutes", int(engine.WorkersWindow.Minutes()))})
}

type peer struct {
	Shard, URL, Status string
	Up                 bool
}

type shardsData struct {
	Topology string
	Peers    []peer
	Pending  int
	Dead     int
	Oldest   string
	Roots    []*domain.Task
	Find     string
}

func (u *UI) shards(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if id := strings.TrimSpace(r.URL.Query().Get("task")); id != "" {
		http.Redirect(w, r, "/ui/trees/"+url.PathEscape(id), http.StatusSeeOther)
		return
	}
	st, err := u.e.GetOutboxStats(ctx)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	roots, err := u.e.ListTreeRoots(ctx, 50)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	d := shardsData{Topology: u.cfg.Topology.String(), Pending: st.Pending, Dead: st.Dead, Roots: roots}
	if !st.Oldest.IsZero() {
		d.Oldest = age(st.Oldest)
	}
	shards := u.cfg.Topology.Shards() // none for the pattern form: open-ended
	d.Peers = make([]peer, len(shards))
	var wg sync.WaitGroup
	for i, s := range shards {
		base, _ := u.cfg.Topology.URL(s)
		d.Peers[i] = peer{Shard: s, URL: base}
		wg.Go(func() { d.Peers[i].Up, d.Peers[i].Status = u.reach(r, s, base) })
	}
	wg.Wait()
	u.render(w, r, 0, "shards", "Shards and trees", "shards", d)
}

// reach asks shard's coordinator, at base, whether it answers on /health;
// this coordinator's own shard answers, since it serves the page. (Its
// URL as the request reached it says nothing: behind a proxy, Host and
// scheme are the proxy's.)
func (u *UI) reach(r *http.Request, shard, base string) (bool, string) {
	if shard == u.e.Shard() {
		return true, "this coordinator"
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, base+"/health", nil)
	if err != nil {
		return false, err.Error()
	}
	start := time.Now()
	resp, err := u.http.Do(req)
	if err != nil {
		return false, "does not answer: " + err.Error()
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, "answers " + resp.Status
	}
	return true, fmt.Sprintf("answers in %d ms", time.Since(start).Milliseconds())
}

type treeData struct {
	ID    string
	Roots []*treeNode
	Count int
	Cut   bool
}

// treeNode is a task drawn with its upstreams; Remote is set for an
// upstream on another shard, drawn as a link.
type treeNode struct {
	*engine.TreeNode
	Remote string
	Up     []*treeNode
}

func (u *UI) tree(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	nodes, err := u.e.GetTree(r.Context(), id)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	byID := make(map[string]*engine.TreeNode, len(nodes))
	for _, n := range nodes {
		byID[n.ID] = n
	}
	var build func(n *engine.TreeNode) *treeNode
	build = func(n *engine.TreeNode) *treeNode {
		t := &treeNode{TreeNode: n}
		for _, up := range n.Upstreams {
			if m := byID[up]; m != nil {
				t.Up = append(t.Up, build(m))
			} else {
				t.Up = append(t.Up, &treeNode{TreeNode: &engine.TreeNode{Task: &domain.Task{ID: up}}, Remote: up})
			}
		}
		return t
	}
	d := treeData{ID: id, Count: len(nodes), Cut: len(nodes) >= engine.MaxTreeShown}
	for _, n := range nodes { // the tops here: the root, or tasks feeding another shard
		if byID[n.DownstreamID] == nil {
			d.Roots = append(d.Roots, build(n))
		}
	}
	u.render(w, r, 0, "tree", "Tree of "+id, "shards", d)
}
