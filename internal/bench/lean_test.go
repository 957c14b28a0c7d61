package bench

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// recorder is a coordinator stand-in that leases numbered tasks and
// records every request it is sent, as "METHOD PATH AUTHORIZATION BODY".
type recorder struct {
	mu       sync.Mutex
	requests []string
	next     atomic.Int64
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.requests = append(r.requests, fmt.Sprintf("%s %s %s %s", req.Method, req.URL.Path, req.Header.Get("Authorization"), body))
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case req.URL.Path == "/tasks/claim" && strings.Contains(string(body), `"max_tasks"`):
		// The batch form: two tasks whatever was asked.
		a, b := r.next.Add(1), r.next.Add(1)
		fmt.Fprintf(w, `{"tasks":[{"task_id":"s0:j-%d","attempt":1},{"task_id":"s0:j-%d","attempt":1}]}`, a, b)
	case req.URL.Path == "/tasks/claim":
		fmt.Fprintf(w, `{"task_id":"s0:j-%d","attempt":1}`, r.next.Add(1))
	case req.URL.Path == "/tasks/results":
		fmt.Fprint(w, `{"results":[{"task_id":"x","status":200},{"task_id":"y","status":200}]}`)
	default:
		fmt.Fprint(w, `{"task_id":"x","state":"completed"}`)
	}
}

// The lean load generator sends what the Go client sends: the same
// requests, with the same token and byte for byte the same bodies, in
// the single and the batch form.
func TestLeanSendsTheClientsRequests(t *testing.T) {
	t.Parallel()
	for _, batch := range []int{1, 2} {
		sent := map[string][]string{}
		for _, load := range []string{LoadClient, LoadLean} {
			rec := &recorder{}
			srv := httptest.NewServer(rec)
			c := Config{Workers: 1, Tasks: 4, Batch: batch, Load: load}
			res := c.driveREST()(t.Context(), srv.URL, "worker-token", []string{"wl"}, c)
			srv.Close()
			if res.err != nil || res.done != 4 {
				t.Fatalf("%s, batch %d: %d lifecycles, %v", load, batch, res.done, res.err)
			}
			slices.Sort(rec.requests)
			sent[load] = rec.requests
		}
		if !reflect.DeepEqual(sent[LoadLean], sent[LoadClient]) {
			t.Errorf("batch %d: the lean load generator sent\n%s\nthe Go client\n%s", batch,
				strings.Join(sent[LoadLean], "\n"), strings.Join(sent[LoadClient], "\n"))
		}
		if want := 4 / batch * 2; len(sent[LoadLean]) != want {
			t.Errorf("batch %d: %d requests, want %d", batch, len(sent[LoadLean]), want)
		}
	}
}

// --load selects the load generator.
func TestDriveREST(t *testing.T) {
	t.Parallel()
	for load, want := range map[string]any{"": drive, LoadClient: drive, LoadLean: driveLean} {
		got := (Config{Load: load}).driveREST()
		if reflect.ValueOf(got).Pointer() != reflect.ValueOf(want).Pointer() {
			t.Errorf("--load %q drives with another load generator", load)
		}
	}
}
