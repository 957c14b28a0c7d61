package httpapi_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/domain"
)

// accounts creates accounts of names and returns their tokens, by name.
func (b *bundle) accounts(names ...string) map[string]string {
	b.t.Helper()
	out := map[string]string{}
	for _, n := range names {
		_, token, err := b.engine.CreateAccount(b.t.Context(), domain.Account{Name: n})
		if err != nil {
			b.t.Fatal(err)
		}
		out[n] = token
	}
	return out
}

// TestUsageOverREST runs two accounts' chunks through the API on a test
// clock and reads GET /usage: sums per account, only the fields asked
// for (an empty worker_account shown when asked for), an account that is
// not an admin seeing its own only, and bad queries refused.
func TestUsageOverREST(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		name := map[bool]string{false: "sqlite", true: "postgres"}[pg]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{tokens: auth.Tokens{Client: "client-token-0123456789", Worker: "worker-token-0123456789"},
				postgres: pg, frozen: true, noLoops: true})
			tokens := b.accounts("ada", "bob", "carl")
			var ada, bob job
			b.mustStatus(b.do("POST", "/jobs", tokens["ada"], jobBody(2, nil)), http.StatusCreated).decode(t, &ada)
			b.mustStatus(b.do("POST", "/jobs", tokens["bob"], jobBody(1, map[string]any{"workload": "dock"})), http.StatusCreated).decode(t, &bob)
			byJob := map[string][]task{}
			for range 3 {
				tk, ok := b.claim("w1", nil)
				if !ok {
					t.Fatal("no task to claim")
				}
				byJob[tk.JobID] = append(byJob[tk.JobID], tk)
			}
			if len(byJob[ada.JobID]) != 2 || len(byJob[bob.JobID]) != 1 {
				t.Fatalf("claimed %v; want ada's two tasks and bob's one", byJob)
			}
			out := func(tk task) string { return "id,score\n" + tk.TaskID + ",1\n" }
			b.clock.Advance(2 * time.Second)
			a := byJob[ada.JobID]
			b.mustStatus(b.worker("POST", "/tasks/"+a[0].TaskID+"/result", result("w1", 1, out(a[0]))), http.StatusOK)
			b.mustStatus(b.worker("POST", "/tasks/results", map[string]any{"results": []any{
				map[string]any{"task_id": a[1].TaskID, "worker_id": "w1", "attempt": 1, "output": out(a[1])},
			}}), http.StatusOK)
			b.clock.Advance(3 * time.Second)
			bt := byJob[bob.JobID][0]
			b.mustStatus(b.worker("POST", "/tasks/"+bt.TaskID+"/failure", map[string]any{"worker_id": "w1", "attempt": 1, "error": "x", "retryable": true}), http.StatusOK)

			usage := func(query, token string) []map[string]any {
				t.Helper()
				var body struct {
					Usage []map[string]any `json:"usage"`
				}
				b.mustStatus(b.do("GET", "/usage"+query, token, nil), http.StatusOK).decode(t, &body)
				return body.Usage
			}
			admin := b.tokens.Client
			check := func(what string, got, want []map[string]any) {
				t.Helper()
				if !reflect.DeepEqual(got, want) {
					g, _ := json.Marshal(got)
					w, _ := json.Marshal(want)
					t.Errorf("%s:\n got %s\nwant %s", what, g, w)
				}
			}
			check("by account", usage("", admin), []map[string]any{
				{"account": "ada", "tasks": 2.0, "worker_seconds": 4.0},
				{"account": "bob", "tasks": 1.0, "worker_seconds": 5.0},
			})
			check("by worker account and workload", usage("?by=worker_account,workload", admin), []map[string]any{
				{"worker_account": "", "workload": "dock", "tasks": 1.0, "worker_seconds": 5.0},
				{"worker_account": "", "workload": "tanimoto", "tasks": 2.0, "worker_seconds": 4.0},
			})
			day := b.clock.Now().UTC().Format(time.DateOnly)
			check("ada's, by account and day", usage("?by=account,day", tokens["ada"]), []map[string]any{
				{"account": "ada", "day": day, "tasks": 2.0, "worker_seconds": 4.0},
			})
			check("carl's", usage("", tokens["carl"]), []map[string]any{})
			check("a later day", usage("?since="+b.clock.Now().Add(24*time.Hour).Format(time.DateOnly), admin), []map[string]any{})

			for _, q := range []string{"?by=owner", "?by=day,day", "?since=yesterday", "?until=2026-02-30",
				"?since=2026-03-02&until=2026-03-01"} {
				r := b.client("GET", "/usage"+q, nil)
				if r.status != http.StatusBadRequest || r.errCode() != "invalid_argument" {
					t.Errorf("GET /usage%s = %s, want 400 invalid_argument", q, r)
				}
			}
			if r := b.do("GET", "/usage", "", nil); r.status != http.StatusUnauthorized {
				t.Errorf("GET /usage without a token = %s, want 401", r)
			}
		})
	}
}

// TestAuditOverREST reads the audit trail page by page as an admin, and
// refuses it to any other account with 403.
func TestAuditOverREST(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: auth.Tokens{Client: "client-token-0123456789", Worker: "worker-token-0123456789"}, noLoops: true})
	ada := b.accounts("ada")["ada"]
	var j job
	b.mustStatus(b.do("POST", "/jobs", ada, jobBody(1, nil)), http.StatusCreated).decode(t, &j)
	b.mustStatus(b.client("POST", "/jobs/"+j.JobID+"/cancel", nil), http.StatusOK)

	type entry struct {
		Time                            time.Time
		Account, Action, Target, Detail string
	}
	var page struct {
		Entries    []entry `json:"entries"`
		NextCursor *string `json:"next_cursor"`
	}
	b.mustStatus(b.client("GET", "/audit?limit=1", nil), http.StatusOK).decode(t, &page)
	if len(page.Entries) != 1 || page.NextCursor == nil {
		t.Fatalf("first page of 1: %+v", page)
	}
	first := page.Entries[0]
	if first.Account != "admin" || first.Action != "job.cancel" || first.Target != j.JobID || first.Time.IsZero() {
		t.Errorf("newest entry %+v; want admin's job.cancel of %s", first, j.JobID)
	}
	b.mustStatus(b.client("GET", "/audit?limit=1&cursor="+*page.NextCursor, nil), http.StatusOK).decode(t, &page)
	if len(page.Entries) != 1 || page.NextCursor == nil {
		t.Fatalf("second page: %+v; want one entry and more", page)
	}
	if e := page.Entries[0]; e.Account != "ada" || e.Action != "job.create" || e.Target != j.JobID || e.Detail != "workload tanimoto, 1 chunks" {
		t.Errorf("second entry %+v; want ada's job.create of %s", e, j.JobID)
	}
	b.mustStatus(b.client("GET", "/audit?limit=5&cursor="+*page.NextCursor, nil), http.StatusOK).decode(t, &page)
	if len(page.Entries) != 1 || page.NextCursor != nil || page.Entries[0].Action != "account.create" || page.Entries[0].Target != "ada" {
		t.Fatalf("last page: %+v; want the creation of account ada, and no more", page)
	}
	r := b.do("GET", "/audit", ada, nil)
	if r.status != http.StatusForbidden || r.errCode() != "permission_denied" {
		t.Errorf("GET /audit as ada = %s, want 403 permission_denied", r)
	}
	for _, q := range []string{"?since=tomorrow", "?limit=0", "?limit=1001", "?cursor=nope"} {
		if r := b.client("GET", "/audit"+q, nil); r.status != http.StatusBadRequest {
			t.Errorf("GET /audit%s = %s, want 400", q, r)
		}
	}
}
