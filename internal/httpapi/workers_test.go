package httpapi_test

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/auth"
)

// TestListWorkers: GET /workers, after a pool worker and the workers of
// two accounts' keys have claimed, shows each by its own ID with its
// key's account and name, its trust, workloads, last call and tasks
// done: an admin all three, an account its own alone, a page at a time.
// Trusting a key shows at once; a revoked key's worker stays listed,
// untrusted. Workers' tokens and strangers are refused, bad pages are
// 400. On both stores.
func TestListWorkers(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		name := map[bool]string{false: "sqlite", true: "postgres"}[pg]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{tokens: auth.Tokens{Client: "client-token-0123456789", Worker: "worker-token-0123456789"},
				postgres: pg, frozen: true, noLoops: true})
			tokens := b.accounts("ada", "bob")
			keys := map[string]string{}
			for account, key := range map[string]string{"ada": "laptop", "bob": "desk"} {
				var k struct{ Key string }
				b.mustStatus(b.do("POST", "/worker-keys", tokens[account], map[string]any{"name": key}), http.StatusCreated).decode(t, &k)
				keys[account] = k.Key
			}
			type worker struct {
				ID        string    `json:"id"`
				Account   string    `json:"account"`
				Key       string    `json:"key"`
				Trusted   bool      `json:"trusted"`
				Workloads []string  `json:"workloads"`
				LastSeen  time.Time `json:"last_seen"`
				TasksDone int64     `json:"tasks_done"`
			}
			type page struct {
				Workers    []worker `json:"workers"`
				NextCursor *string  `json:"next_cursor"`
			}
			list := func(token, query string) page {
				t.Helper()
				var p page
				b.mustStatus(b.do("GET", "/workers"+query, token, nil), http.StatusOK).decode(t, &p)
				for i, w := range p.Workers {
					if w.LastSeen.Location() != time.UTC {
						t.Errorf("last_seen %v of %s is not in UTC", w.LastSeen, w.ID)
					}
					p.Workers[i].LastSeen = w.LastSeen.UTC()
				}
				return p
			}
			check := func(what string, got page, want ...worker) {
				t.Helper()
				if want == nil {
					want = []worker{}
				}
				if got.Workers == nil || !reflect.DeepEqual(got.Workers, want) || got.NextCursor != nil {
					t.Errorf("%s: %+v (next %v),\nwant %+v", what, got.Workers, got.NextCursor, want)
				}
			}

			// The pool's worker runs a task; ada's and bob's workers claim.
			t0 := b.clock.Now().UTC().Truncate(time.Microsecond)
			j := b.createJob(1, nil)
			tk, ok := b.claim("pool-1", map[string]any{"workloads": []string{"tanimoto"}})
			if !ok || tk.JobID != j.JobID {
				t.Fatalf("the pool's claim: %+v, %t", tk, ok)
			}
			b.mustStatus(b.worker("POST", "/tasks/"+tk.TaskID+"/result", result("pool-1", tk.Attempt, "id,score\na,1\n")), http.StatusOK)
			b.clock.Advance(time.Second)
			b.mustStatus(b.do("POST", "/tasks/claim", keys["ada"], map[string]any{"worker_id": "ada-box", "workloads": []string{"dock"}}), http.StatusNoContent)
			b.clock.Advance(time.Second)
			b.mustStatus(b.do("POST", "/tasks/claim", keys["bob"], map[string]any{"worker_id": "bob-box"}), http.StatusNoContent)

			pool := worker{ID: "pool-1", Trusted: true, Workloads: []string{"tanimoto"}, LastSeen: t0, TasksDone: 1}
			ada := worker{ID: "ada-box", Account: "ada", Key: "laptop", Workloads: []string{"dock"}, LastSeen: t0.Add(time.Second)}
			bob := worker{ID: "bob-box", Account: "bob", Key: "desk", Workloads: []string{}, LastSeen: t0.Add(2 * time.Second)}
			check("the admin's list", list(b.tokens.Client, ""), bob, ada, pool)
			check("ada's list", list(tokens["ada"], ""), ada)
			check("bob's list", list(tokens["bob"], ""), bob)

			// A page at a time.
			first := list(b.tokens.Client, "?limit=2")
			if len(first.Workers) != 2 || first.Workers[0].ID != "bob-box" || first.NextCursor == nil {
				t.Fatalf("the first page of 2: %+v, next %v", first.Workers, first.NextCursor)
			}
			check("the second page", list(b.tokens.Client, "?limit=2&cursor="+*first.NextCursor), pool)

			// Trusted, ada's key says so at once; revoked, it is untrusted.
			b.mustStatus(b.client("PATCH", "/worker-keys/ada/laptop", map[string]any{"trusted": true}), http.StatusOK)
			ada.Trusted = true
			check("ada's list once her key is trusted", list(tokens["ada"], ""), ada)
			b.mustStatus(b.do("DELETE", "/worker-keys/laptop", tokens["ada"], nil), http.StatusOK)
			ada.Trusted = false
			check("ada's list once her key is revoked", list(tokens["ada"], ""), ada)
			check("the admin's list once ada's key is revoked", list(b.tokens.Client, ""), bob, ada, pool)
			check("bob's list once ada's key is revoked", list(tokens["bob"], ""), bob)

			for _, c := range []struct {
				token, query string
				want         int
			}{
				{"", "", 401}, {"not-a-token", "", 401}, {b.tokens.Worker, "", 403}, {keys["bob"], "", 403},
				{b.tokens.Client, "?limit=0", 400}, {b.tokens.Client, "?limit=1001", 400}, {b.tokens.Client, "?limit=x", 400},
				{b.tokens.Client, "?cursor=not-ours!", 400},
			} {
				if r := b.do("GET", "/workers"+c.query, c.token, nil); r.status != c.want {
					t.Errorf("GET /workers%s with token %q: %s, want %d", c.query, c.token, r, c.want)
				}
			}
		})
	}
}
