package httpapi_test

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/auth"
)

// TestListWorkloads: GET /workloads lists the workloads that the workers
// seen in the last ten minutes name in their claims, with how many
// workers name each and when one last called; every account sees the
// same list, workers and strangers none; a worker that stops calling
// drops out after the window. On both stores.
func TestListWorkloads(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		name := map[bool]string{false: "sqlite", true: "postgres"}[pg]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{tokens: auth.Tokens{Client: "client-token-0123456789", Worker: "worker-token-0123456789"},
				postgres: pg, frozen: true, noLoops: true})
			bob := b.accounts("bob")["bob"]
			type workload struct {
				Name     string    `json:"name"`
				Workers  int       `json:"workers"`
				LastSeen time.Time `json:"last_seen"`
				Versions []string  `json:"versions"`
			}
			list := func(what string, want ...workload) {
				t.Helper()
				for _, token := range []string{b.tokens.Client, bob} {
					var got struct{ Workloads []workload }
					b.mustStatus(b.do("GET", "/workloads", token, nil), http.StatusOK).decode(t, &got)
					if got.Workloads == nil {
						t.Fatalf("%s: workloads is null, want a list", what)
					}
					if len(want) == 0 {
						want = []workload{}
					}
					for i := range got.Workloads {
						if got.Workloads[i].LastSeen.Location() != time.UTC {
							t.Errorf("%s: last_seen %v is not in UTC", what, got.Workloads[i].LastSeen)
						}
						got.Workloads[i].LastSeen = got.Workloads[i].LastSeen.UTC()
					}
					if !reflect.DeepEqual(got.Workloads, want) {
						t.Errorf("%s: workloads %+v, want %+v", what, got.Workloads, want)
					}
				}
			}
			claim := func(worker string, workloads ...string) {
				t.Helper()
				body := map[string]any{"worker_id": worker}
				if workloads != nil {
					body["workloads"] = workloads
				}
				b.mustStatus(b.worker("POST", "/tasks/claim", body), http.StatusNoContent)
			}

			// Who may call it: a client's token, of any account.
			for _, c := range []struct {
				token string
				want  int
			}{{"", 401}, {"not-a-token", 401}, {b.tokens.Worker, 403}} {
				if r := b.do("GET", "/workloads", c.token, nil); r.status != c.want {
					t.Errorf("GET /workloads with token %q: %s, want %d", c.token, r, c.want)
				}
			}
			list("no worker yet")

			t0 := b.clock.Now().UTC().Truncate(time.Microsecond)
			claim("w1", "dock", "score")
			claim("w2", "score")
			claim("w3") // any workload: it names none
			list("three workers", workload{"dock", 1, t0, []string{}}, workload{"score", 2, t0, []string{}})

			// Six minutes on, w2 names another workload too; w1 keeps quiet.
			b.clock.Advance(6 * time.Minute)
			t1 := t0.Add(6 * time.Minute)
			claim("w2", "fold", "score")
			list("w2 announced again", workload{"dock", 1, t0, []string{}}, workload{"fold", 1, t1, []string{}}, workload{"score", 2, t1, []string{}})

			// Versions announced with the workloads, each listed once; a
			// version of a workload the claim does not name, or of a bad
			// form, is refused.
			versioned := func(worker string, versions map[string]any) response {
				return b.worker("POST", "/tasks/claim", map[string]any{"worker_id": worker, "workloads": []string{"fold"}, "workload_versions": versions})
			}
			b.mustStatus(versioned("w4", map[string]any{"fold": "2.1+gpu"}), http.StatusNoContent)
			b.mustStatus(versioned("w5", map[string]any{"fold": "2.0"}), http.StatusNoContent)
			b.mustStatus(versioned("w6", map[string]any{"fold": "2.0"}), http.StatusNoContent)
			for _, bad := range []map[string]any{{"dock": "1"}, {"fold": "two words"}, {"fold": ""}} {
				if r := versioned("w7", bad); r.status != http.StatusBadRequest {
					t.Errorf("a claim with workload_versions %v: %s, want 400", bad, r)
				}
			}
			list("versions announced", workload{"dock", 1, t0, []string{}}, workload{"fold", 4, t1, []string{"2.0", "2.1+gpu"}},
				workload{"score", 2, t1, []string{}})

			// Past ten minutes since w1's last call, its workloads drop out.
			b.clock.Advance(4*time.Minute + time.Second)
			list("w1 gone quiet", workload{"fold", 4, t1, []string{"2.0", "2.1+gpu"}}, workload{"score", 1, t1, []string{}})
			b.clock.Advance(6 * time.Minute)
			list("every worker gone quiet")
		})
	}
}
