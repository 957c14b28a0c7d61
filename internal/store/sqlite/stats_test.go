package sqlite

import (
	"path/filepath"
	"testing"
)

func TestPoolStats(t *testing.T) {
	t.Parallel()
	s := openStore(t, filepath.Join(t.TempDir(), "scimesh.db"))
	if _, err := s.TaskCountByState(t.Context()); err != nil { // a read: opens a reader connection
		t.Fatal(err)
	}
	ps := s.PoolStats()
	if len(ps) != 2 || ps[0].Name != "writer" || ps[1].Name != "reader" {
		t.Fatalf("pools %+v, want writer and reader", ps)
	}
	if w := ps[0]; w.Max != 1 || w.Open != 1 || w.InUse != 0 || w.Idle != 1 {
		t.Errorf("writer pool %+v, want its one connection open and idle", w)
	}
	if r := ps[1]; r.Max < 2 || r.Open < 1 || r.InUse != 0 || r.Idle != r.Open {
		t.Errorf("reader pool %+v, want at least one connection open, all idle", r)
	}
}
