package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

func exerciseCache(t *testing.T, newStore newFunc) {
	t.Run("PutGetReplaceDelete", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		at := Epoch()
		j := NewJob("j1", at)
		insertJobs(t, s, j)
		insertTasks(t, s, NewTasks(j, 3)...)
		a, b, c := ChunkTaskID("j1", 0), ChunkTaskID("j1", 1), ChunkTaskID("j1", 2)
		get := func(what string, keys []string, want ...store.CacheEntry) {
			t.Helper()
			got, err := s.CacheGet(ctx, keys)
			if err != nil {
				t.Fatalf("%s: CacheGet: %v", what, err)
			}
			if len(got) != len(want) {
				t.Errorf("%s: got %d entries %+v, want %d", what, len(got), got, len(want))
			}
			for _, w := range want {
				if g, ok := got[w.Key]; !ok || g != w {
					t.Errorf("%s: entry %s is %+v, want %+v", what, w.Key, g, w)
				}
			}
		}
		put := func(entries ...store.CacheEntry) {
			t.Helper()
			if err := s.CachePut(ctx, entries); err != nil {
				t.Fatalf("CachePut: %v", err)
			}
		}
		get("an empty cache", []string{"k1"})
		e1 := store.CacheEntry{Key: "k1", TaskID: a, Rows: 10, TopK: 10, CreatedAt: at}
		e2 := store.CacheEntry{Key: "k2", TaskID: b, Rows: 3, TopK: 10, CreatedAt: at.Add(time.Second)}
		put(e1, e2)
		get("two entries", []string{"k1", "k2", "k3"}, e1, e2)
		get("one asked", []string{"k2"}, e2)
		// A smaller or equal top_k does not replace an entry; a larger does.
		put(store.CacheEntry{Key: "k1", TaskID: c, Rows: 5, TopK: 5, CreatedAt: at.Add(2 * time.Second)},
			store.CacheEntry{Key: "k2", TaskID: c, Rows: 3, TopK: 10, CreatedAt: at.Add(2 * time.Second)})
		get("after smaller ones", []string{"k1", "k2"}, e1, e2)
		e1 = store.CacheEntry{Key: "k1", TaskID: c, Rows: 20, TopK: 20, CreatedAt: at.Add(3 * time.Second)}
		put(e1)
		get("after a larger one", []string{"k1", "k2"}, e1, e2)
		// An entry goes with the task that holds its output.
		if _, err := s.TaskDelete(ctx, &store.TaskDeleteParams{IDs: []string{c}}); err != nil {
			t.Fatal(err)
		}
		get("after its task was deleted", []string{"k1", "k2"}, e2)
		put()
	})
	t.Run("JobAddCached", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		j := NewJob("j1", Epoch())
		j.Cached = 2
		insertJobs(t, s, j)
		before, err := s.JobGet(ctx, "j1")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.JobAddCached(ctx, "j1", 3); err != nil {
			t.Fatalf("JobAddCached: %v", err)
		}
		after, err := s.JobGet(ctx, "j1")
		if err != nil {
			t.Fatal(err)
		}
		if after.Cached != 5 || after.Version != before.Version {
			t.Errorf("after adding 3 to 2: cached %d, version %d; want 5 and version %d", after.Cached, after.Version, before.Version)
		}
		// A job update written meanwhile keeps the count.
		before.Status = domain.JobRunning
		if err := s.JobUpdate(ctx, before); err != nil {
			t.Fatalf("JobUpdate after JobAddCached: %v", err)
		}
		if after, err = s.JobGet(ctx, "j1"); err != nil || after.Cached != 5 {
			t.Errorf("after a job update: cached %d (%v), want 5", after.Cached, err)
		}
		if err := s.JobAddCached(ctx, "nope", 1); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("JobAddCached of an unknown job: %v, want ErrNotFound", err)
		}
	})
}
