package e2e

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	neturl "net/url"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/httpapi"
	"github.com/scimesh/scimesh/internal/server"
	"github.com/scimesh/scimesh/internal/ui"
	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
)

// How a client route answers one account about another's objects.
const (
	// hidden: the route names an object (a job, a task, an upload); for
	// another account's it answers exactly as for one that does not exist.
	hidden = "hidden"
	// listsOwn: the route lists; another account's objects are not in it.
	listsOwn = "lists own"
	// makesOwn: the route only makes the caller's own objects; none of
	// another account's is named or shown.
	makesOwn = "makes own"
	// shared: the route shows what is no account's (workloads, shards) or
	// nothing at all (the login, static files).
	shared = "shared"
	// admins: the route is an admin's (managing accounts); anyone else is
	// refused and changes nothing.
	admins = "admins only"
	// ownAccount: the route shows the caller's own account, no other.
	ownAccount = "own account"
	// ownUsage: the route sums the worker time of the caller's own jobs,
	// no other account's.
	ownUsage = "own usage"
	// hiddenKey: the route names a worker key; another account's answers
	// exactly as one that does not exist.
	hiddenKey = "hidden key"
)

// isolationREST says, for every client route of the REST API, how it
// keeps accounts apart. A client route without an entry fails
// TestIsolation: say how a new route keeps one account from another's.
var isolationREST = map[string]string{
	"POST /upload":                        makesOwn,
	"POST /jobs":                          hidden, // another account's upload_id
	"GET /jobs":                           listsOwn,
	"GET /jobs/{job_id}":                  hidden,
	"GET /jobs/{job_id}/tasks":            hidden,
	"GET /jobs/{job_id}/result":           hidden,
	"POST /jobs/{job_id}/cancel":          hidden,
	"POST /jobs/{job_id}/retry":           hidden,
	"GET /tasks/{task_id}":                hidden,
	"GET /tasks/{task_id}/logs":           hidden,
	"GET /account":                        ownAccount,
	"POST /accounts":                      admins,
	"GET /accounts":                       admins,
	"GET /accounts/{name}":                admins,
	"PATCH /accounts/{name}":              admins,
	"POST /accounts/{name}/tokens":        admins,
	"GET /usage":                          ownUsage,
	"GET /audit":                          admins,
	"GET /workloads":                      shared,
	"GET /workers":                        listsOwn, // the workers of one's own keys
	"POST /worker-keys":                   makesOwn,
	"GET /worker-keys":                    listsOwn,
	"DELETE /worker-keys/{name}":          hiddenKey,
	"PATCH /worker-keys/{account}/{name}": hiddenKey,
}

// isolationRPC does for the client service's procedures what
// isolationREST does for routes.
var isolationRPC = map[string]string{
	"/scimesh.v1.Queue/Submit":  makesOwn,
	"/scimesh.v1.Queue/Query":   hidden,
	"/scimesh.v1.Queue/GetLogs": hidden,
}

// isolationUI does it for the dashboard's routes.
var isolationUI = map[string]string{
	"GET /ui/static/":                  shared,
	"GET /ui/login":                    shared,
	"POST /ui/login":                   shared,
	"POST /ui/logout":                  shared,
	"GET /ui/{$}":                      shared,
	"GET /ui/jobs":                     listsOwn,
	"GET /ui/jobs/new":                 shared, // the workloads, no account's
	"POST /ui/jobs/new":                hidden, // another account's upload_id
	"POST /ui/upload":                  makesOwn,
	"GET /ui/jobs/{id}":                hidden,
	"GET /ui/jobs/{id}/events":         hidden,
	"GET /ui/jobs/{id}/result":         hidden,
	"POST /ui/jobs/{id}/cancel":        hidden,
	"POST /ui/jobs/{id}/retry":         hidden,
	"GET /ui/tasks/{id}":               hidden,
	"GET /ui/tasks/{id}/log":           hidden,
	"GET /ui/workers":                  listsOwn, // the workers of one's own keys
	"GET /ui/usage":                    ownUsage,
	"GET /ui/shards":                   shared,
	"GET /ui/trees/{id}":               hidden,
	"GET /ui/accounts":                 admins,
	"POST /ui/accounts":                admins,
	"POST /ui/accounts/{name}":         admins,
	"POST /ui/accounts/{name}/disable": admins,
	"POST /ui/accounts/{name}/enable":  admins,
	"POST /ui/accounts/{name}/tokens":  admins,
}

// TestIsolation walks every client route of the REST API, every procedure
// of the client's RPC service and every dashboard route as one account
// (bob) against another's (ada's) upload, job, chunk task, stitch task
// and task tree: each answers exactly as for an object that does not
// exist (the same status, code and words, but for the ID), lists none of
// ada's, and changes nothing of hers. An admin sees them, with their owner.
func TestIsolation(t *testing.T) {
	t.Parallel()
	h := startHostile(t, server.Config{})
	ctx := t.Context()
	var ada, bob string
	for _, name := range []string{"ada", "bob"} {
		_, token, err := h.engine.CreateAccount(ctx, domain.Account{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if name == "ada" {
			ada = token
		} else {
			bob = token
		}
	}

	// ada's objects: an upload, a job of two chunks cut from it, a tree.
	upload := uploadCSV(t, h.url, ada, "id,score\na,1\nb,2\n")
	var job jobOut
	if s := call(t, "POST", h.url+"/jobs", ada, map[string]any{"workload": "ada-w", "chunk_rows": 1, "input": map[string]any{"upload_id": upload}}, &job); s != 201 {
		t.Fatalf("ada's job: %d", s)
	}
	var tasks struct{ Tasks []taskOut }
	if s := call(t, "GET", h.url+"/jobs/"+job.JobID+"/tasks", ada, nil, &tasks); s != 200 || len(tasks.Tasks) != 2 {
		t.Fatalf("ada's tasks: %d, %d tasks", s, len(tasks.Tasks))
	}
	chunk, stitch := tasks.Tasks[0].TaskID, job.JobID+"-root"
	q := func(token string) scimeshv1connect.QueueClient {
		return scimeshv1connect.NewQueueClient(http.DefaultClient, h.url, withToken(token))
	}
	tree, err := q(ada).Submit(ctx, connect.NewRequest(&v1.SubmitRequest{Tasks: []*v1.TaskSpec{
		{Id: "s0:root", Workload: "sum", Args: []*v1.Arg{{Kind: &v1.Arg_TaskId{TaskId: "s0:leaf"}}}},
		{Id: "s0:leaf", Workload: "num"},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	treeRoot, treeLeaf := tree.Msg.RootId, tree.Msg.Ids["s0:leaf"]
	// One of ada's chunks run, so that she has usage to keep from bob.
	var run taskOut
	if s := call(t, "POST", h.url+"/tasks/claim", hostileTokens.Worker, map[string]any{"worker_id": "w1", "workloads": []string{"ada-w"}}, &run); s != 200 {
		t.Fatalf("claim of ada's chunk: %d", s)
	}
	if s := call(t, "POST", h.url+"/tasks/"+run.TaskID+"/result", hostileTokens.Worker,
		map[string]any{"worker_id": "w1", "attempt": run.Attempt, "output": "id,score\na,1\n"}, nil); s != 200 {
		t.Fatalf("result of ada's chunk: %d", s)
	}
	// ada's machine, enrolled with a worker key, has called.
	_, adaKey, err := h.engine.CreateWorkerKey(domain.WithCaller(ctx, domain.Caller{Account: "ada"}), "ada-laptop")
	if err != nil {
		t.Fatal(err)
	}
	if s := call(t, "POST", h.url+"/tasks/claim", adaKey, map[string]any{"worker_id": "ada-box"}, nil); s != http.StatusNoContent {
		t.Fatalf("claim of ada's untrusted worker: %d", s)
	}
	before := adasState(t, h, ada, job.JobID, []string{chunk, stitch, treeRoot, treeLeaf})

	// REST: every client route.
	objects := map[string][]string{"{job_id}": {job.JobID}, "{task_id}": {chunk, stitch, treeRoot, treeLeaf}}
	missing := map[string]string{"{job_id}": "s0:no-such-job", "{task_id}": "s0:no-such-task"}
	for _, pattern := range httpapi.New(nil, auth.NewGate(auth.Tokens{}), nil, 0).Routes() {
		if restRoutes[pattern].role != auth.Client {
			continue
		}
		how, ok := isolationREST[pattern]
		if !ok {
			t.Errorf("client route %q is not in isolationREST: say how it keeps one account from another's objects", pattern)
			continue
		}
		method, path, _ := strings.Cut(pattern, " ")
		switch {
		case how == hidden && pattern == "POST /jobs":
			spec := func(id string) map[string]any {
				return map[string]any{"workload": "w", "input": map[string]any{"upload_id": id}}
			}
			sameAsMissing(t, pattern, upload, "s0:uno-such-upload", func(id string) (int, string) {
				return rawCall(t, method, h.url+path, bob, spec(id))
			})
		case how == hidden:
			param := path[strings.Index(path, "{") : strings.Index(path, "}")+1]
			for _, id := range objects[param] {
				sameAsMissing(t, pattern, id, missing[param], func(id string) (int, string) {
					return rawCall(t, method, h.url+strings.Replace(path, param, id, 1), bob, nil)
				})
			}
		case how == listsOwn:
			for _, query := range []string{"", "?owner=ada", "?status=pending"} {
				status, body := rawCall(t, method, h.url+path+query, bob, nil)
				if status != 200 || strings.Contains(body, job.JobID) || strings.Contains(body, "ada-laptop") {
					t.Errorf("bob's %s%s: %d %s; want 200 without ada's job or worker key", pattern, query, status, body)
				}
			}
		case how == admins:
			// What would change ada's account, or make bob another.
			body := map[string]any{"POST": map[string]any{"name": "ada", "revoke_others": true}, "PATCH": map[string]any{"disabled": true}}[method]
			if method == "POST" && path == "/accounts" {
				body = map[string]any{"name": "mallory", "admin": true}
			}
			status, answer := rawCall(t, method, h.url+strings.Replace(path, "{name}", "ada", 1), bob, body)
			if status != http.StatusForbidden || !strings.Contains(answer, "permission_denied") || strings.Contains(answer, `"ada"`) {
				t.Errorf("bob's %s: %d %s; want 403 permission_denied, nothing of ada's", pattern, status, answer)
			}
		case how == hiddenKey:
			ada, missing := "ada-laptop", "no-such-key"
			if strings.Contains(path, "{account}") {
				ada, missing = "ada/ada-laptop", "ada/no-such-key"
			}
			sameAsMissing(t, pattern, ada, missing, func(id string) (int, string) {
				target := strings.Replace(path, "{name}", id, 1)
				if strings.Contains(path, "{account}") {
					target = "/worker-keys/" + id
				}
				var body any
				if method == "PATCH" {
					body = map[string]any{"trusted": true}
				}
				return rawCall(t, method, h.url+target, bob, body)
			})
		case how == ownUsage:
			for token, who := range map[string]string{bob: "bob's", hostileTokens.Client: "the admin's"} {
				status, answer := rawCall(t, method, h.url+path+"?by=account,workload", token, nil)
				if status != 200 || strings.Contains(answer, `"ada"`) == (who == "bob's") {
					t.Errorf("%s %s: %d %s; want 200, with ada's usage for the admin alone", who, pattern, status, answer)
				}
			}
		case how == shared: // the same for everyone
			status, answer := rawCall(t, method, h.url+path, bob, nil)
			adminStatus, adminAnswer := rawCall(t, method, h.url+path, hostileTokens.Client, nil)
			if status != 200 || status != adminStatus || answer != adminAnswer {
				t.Errorf("bob's %s: %d %s; the admin's: %d %s; want 200 and the same", pattern, status, answer, adminStatus, adminAnswer)
			}
		case how == ownAccount:
			status, answer := rawCall(t, method, h.url+path, bob, nil)
			if status != 200 || !strings.Contains(answer, `"name":"bob"`) || strings.Contains(answer, "ada") {
				t.Errorf("bob's %s: %d %s; want 200, his own account alone", pattern, status, answer)
			}
		}
	}

	// RPC: every procedure of the client's service.
	for _, proc := range procedures() {
		if !strings.HasPrefix(proc, "/scimesh.v1.Queue/") {
			continue
		}
		how, ok := isolationRPC[proc]
		if !ok {
			t.Errorf("procedure %q is not in isolationRPC: say how it keeps one account from another's objects", proc)
			continue
		}
		if how != hidden {
			continue
		}
		for _, id := range objects["{task_id}"] {
			sameAsMissing(t, proc, id, "s0:no-such-task", func(id string) (int, string) {
				var err error
				switch proc {
				case "/scimesh.v1.Queue/Query":
					_, err = q(bob).Query(ctx, connect.NewRequest(&v1.QueryRequest{TaskId: id}))
				case "/scimesh.v1.Queue/GetLogs":
					var s *connect.ServerStreamForClient[v1.LogChunk]
					if s, err = q(bob).GetLogs(ctx, connect.NewRequest(&v1.GetLogsRequest{TaskId: id})); err == nil {
						for s.Receive() {
							t.Errorf("bob read a line of task %s's log", id)
						}
						err = s.Err()
					}
				default:
					t.Fatalf("no call for %s", proc)
				}
				var ce *connect.Error
				if !errors.As(err, &ce) {
					t.Fatalf("bob's %s of task %s: %v, want an RPC error", proc, id, err)
				}
				return int(ce.Code()), ce.Message()
			})
		}
	}

	// The dashboard: every route, bob with his token as a bearer token.
	dash, err := ui.New(nil, ui.Config{})
	if err != nil {
		t.Fatal(err)
	}
	uiObjects := map[string][]string{"/ui/jobs/": {job.JobID}, "/ui/tasks/": {chunk, stitch, treeRoot, treeLeaf}, "/ui/trees/": {treeRoot, treeLeaf}}
	for _, pattern := range dash.Routes() {
		how, ok := isolationUI[pattern]
		if !ok {
			t.Errorf("dashboard route %q is not in isolationUI: say how it keeps one account from another's objects", pattern)
			continue
		}
		method, path, _ := strings.Cut(pattern, " ")
		switch how {
		case hidden:
			if pattern == "POST /ui/jobs/new" {
				sameAsMissing(t, pattern, upload, "s0:uno-such-upload", func(id string) (int, string) {
					return rawCall(t, method, h.url+path, bob, neturl.Values{"upload_id": {id}, "workload": {"w"}})
				})
				continue
			}
			prefix := path[:strings.Index(path, "{")]
			for _, id := range uiObjects[prefix] {
				sameAsMissing(t, pattern, id, "s0:no-such-thing", func(id string) (int, string) {
					return rawCall(t, method, h.url+strings.Replace(path, "{id}", id, 1), bob, nil)
				})
			}
		case listsOwn:
			if status, body := rawCall(t, method, h.url+path, bob, nil); status != 200 || strings.Contains(body, job.JobID) || strings.Contains(body, "ada-laptop") {
				t.Errorf("bob's %s: %d; want 200 without ada's job or worker", pattern, status)
			}
		case ownUsage: // ada's name is in the table of usage of those who see it
			for token, who := range map[string]string{bob: "bob's", hostileTokens.Client: "the admin's"} {
				status, page := rawCall(t, method, h.url+path, token, nil)
				if status != 200 || strings.Contains(page, "<td>ada</td>") == (who == "bob's") {
					t.Errorf("%s %s: %d; want 200, with ada's usage for the admin alone", who, pattern, status)
				}
			}
		case admins: // the page does not exist for him
			if status, _ := rawCall(t, method, h.url+strings.Replace(path, "{name}", "ada", 1), bob, nil); status != http.StatusNotFound {
				t.Errorf("bob's %s: %d; want 404", pattern, status)
			}
		}
	}

	if list, err := h.engine.ListAccounts(ctx); err != nil || len(list) != 3 || list[0].Name != "ada" || list[0].Disabled || list[2].Name != "bob" || list[2].Admin {
		t.Errorf("the accounts after bob's calls: %v, %v; want ada, admin and bob as they were made", list, err)
	}
	if keys, err := h.engine.ListWorkerKeys(ctx); err != nil || len(keys) != 1 || keys[0].Name != "ada-laptop" || keys[0].Trusted {
		t.Errorf("the worker keys after bob's calls: %v, %v; want ada's, untrusted", keys, err)
	}
	if after := adasState(t, h, ada, job.JobID, []string{chunk, stitch, treeRoot, treeLeaf}); after != before {
		t.Errorf("ada's objects changed under bob's calls:\nbefore %s\nafter  %s", before, after)
	}

	// An admin sees ada's job, with its owner, and can filter by it.
	var seen struct {
		Owner string `json:"owner"`
	}
	if s := call(t, "GET", h.url+"/jobs/"+job.JobID, hostileTokens.Client, nil, &seen); s != 200 || seen.Owner != "ada" {
		t.Errorf("the admin's GET of ada's job: %d, owner %q", s, seen.Owner)
	}
	var list struct{ Jobs []jobOut }
	if s := call(t, "GET", h.url+"/jobs?owner=ada", hostileTokens.Client, nil, &list); s != 200 || len(list.Jobs) != 1 || list.Jobs[0].JobID != job.JobID {
		t.Errorf("the admin's list of ada's jobs: %d, %+v", s, list.Jobs)
	}
	// An admin sees ada's worker, under her key, as ada herself does.
	for token, who := range map[string]string{hostileTokens.Client: "the admin's", ada: "ada's"} {
		if s, body := rawCall(t, "GET", h.url+"/workers", token, nil); s != 200 || !strings.Contains(body, `"id":"ada-box","account":"ada","key":"ada-laptop"`) {
			t.Errorf("%s GET /workers: %d %s; want ada's worker", who, s, body)
		}
		if s, page := rawCall(t, "GET", h.url+"/ui/workers", token, nil); s != 200 || !strings.Contains(page, "ada-laptop") {
			t.Errorf("%s workers page: %d; want ada's worker", who, s)
		}
	}
}

// sameAsMissing checks that what call answers about another account's
// object id is what it answers about missing, a name of nothing: a 404
// (NotFound over RPC; an event stream's failure event for the
// dashboard's), in the same words but for the ID.
func sameAsMissing(t *testing.T, what, id, missing string, call func(id string) (int, string)) {
	t.Helper()
	gotStatus, got := call(id)
	wantStatus, want := call(missing)
	if wantStatus != http.StatusNotFound && wantStatus != int(connect.CodeNotFound) && !strings.Contains(want, "does not exist") {
		t.Fatalf("%s of a missing object: %d %s; want it not found", what, wantStatus, want)
	}
	got, want = strings.ReplaceAll(got, id, "ID"), strings.ReplaceAll(want, missing, "ID")
	if gotStatus != wantStatus || got != want {
		t.Errorf("bob's %s of ada's %s: %d %q; of a missing one: %d %q", what, id, gotStatus, got, wantStatus, want)
	}
}

// rawCall sends a body (none when nil; url.Values as a form; anything
// else as JSON) and returns the status and the body.
func rawCall(t *testing.T, method, url, token string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	ctype := "application/json"
	switch b := body.(type) {
	case nil:
	case neturl.Values:
		rd, ctype = strings.NewReader(b.Encode()), "application/x-www-form-urlencoded"
	default:
		data, _ := json.Marshal(body)
		rd = strings.NewReader(string(data))
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := hostileClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// adasState describes ada's job and tasks as she sees them, to compare
// before and after bob's calls.
func adasState(t *testing.T, h *hostile, ada, jobID string, taskIDs []string) string {
	t.Helper()
	var b strings.Builder
	var j map[string]any
	call(t, "GET", h.url+"/jobs/"+jobID, ada, nil, &j)
	delete(j, "progress_token")
	out, _ := json.Marshal(j)
	b.Write(out)
	for _, id := range taskIDs {
		var task map[string]any
		if s := call(t, "GET", h.url+"/tasks/"+id, ada, nil, &task); s != 200 {
			t.Fatalf("ada's task %s: %d", id, s)
		}
		out, _ := json.Marshal(task)
		b.Write(out)
	}
	return b.String()
}
