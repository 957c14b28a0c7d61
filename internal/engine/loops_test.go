package engine

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
)

// TestWakeForAnotherProcessesWork: a notification from another process
// wakes only the waiting claims its work can feed; this process's own
// notifications wake nothing (it woke its claims as it made the work); a
// payload it cannot read wakes every claim. A note that worker keys
// changed wakes none and forgets the keys this process remembers.
func TestWakeForAnotherProcessesWork(t *testing.T) {
	t.Parallel()
	e := &Engine{claimers: &claimers{max: 10}, self: "me", keys: newKeyCache()}
	join := func(workloads ...string) *claimer {
		w, err := e.claimers.join(domain.KindChunk, workloads, 1)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	a1, a2, a3, b := join("a"), join("a"), join("a"), join("b")
	all := []*claimer{a1, a2, a3, b}
	woken := func() []bool {
		var out []bool
		for _, w := range all {
			select {
			case <-w.woken:
				out = append(out, true)
			default:
				out = append(out, false)
			}
		}
		return out
	}
	note := func(n workNote) string {
		p, _ := json.Marshal(n)
		return string(p)
	}
	for _, c := range []struct {
		name    string
		payload string
		want    []bool
	}{
		{"two tasks of a from another process", note(workNote{From: "other", Kind: domain.KindChunk, Workload: "a", N: 2}), []bool{true, true, false, false}},
		{"this process's own", note(workNote{From: "me", Kind: domain.KindChunk, Workload: "a", N: 2}), []bool{false, false, false, false}},
		{"tree work", note(workNote{From: "other", Kind: domain.KindTree, N: 5}), []bool{false, false, false, false}},
		{"an unknown amount", note(workNote{From: "other", Kind: domain.KindChunk, Workload: "b", N: -1}), []bool{true, true, true, true}},
		{"a payload of an older version", "", []bool{true, true, true, true}},
		{"worker keys changed", note(workNote{From: "other", Kind: authNote, N: 1}), []bool{false, false, false, false}},
	} {
		_, _, gen := e.keys.get("h", time.Now())
		e.keys.put("h", domain.Principal{Account: "ada"}, time.Now(), gen)
		e.wakeFor(c.payload)
		if got := woken(); !slices.Equal(got, c.want) {
			t.Errorf("%s: woken %v, want %v", c.name, got, c.want)
		}
		_, kept, _ := e.keys.get("h", time.Now())
		if forget := c.payload == "" || c.name == "worker keys changed"; kept == forget {
			t.Errorf("%s: a remembered key kept %v, want %v", c.name, kept, !forget)
		}
	}
}

// TestWorkNotesAddUp: work made runnable between two notifications is
// said once per kind and workload, with the tasks added up.
func TestWorkNotesAddUp(t *testing.T) {
	t.Parallel()
	w := workNotes{due: map[workNote]int{}}
	w.add(domain.KindChunk, "a", 2)
	w.add(domain.KindChunk, "a", 3)
	w.add(domain.KindTree, "", 1)
	w.add(domain.KindChunk, "b", 1)
	w.add(domain.KindChunk, "b", -1)
	w.add(domain.KindChunk, "b", 4)
	got := w.take()
	want := map[workNote]int{{Kind: domain.KindChunk, Workload: "a"}: 5, {Kind: domain.KindTree}: 1, {Kind: domain.KindChunk, Workload: "b"}: -1}
	if len(got) != len(want) {
		t.Fatalf("notes %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("note %+v: %d tasks, want %d", k, got[k], n)
		}
	}
	if again := w.take(); len(again) != 0 {
		t.Errorf("notes after take: %v, want none", again)
	}
}
