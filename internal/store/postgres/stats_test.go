package postgres_test

import "testing"

func TestPoolStats(t *testing.T) {
	t.Parallel()
	s, _ := openURL(t, "pool_max_conns=7")
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	ps := s.PoolStats()
	if len(ps) != 1 {
		t.Fatalf("%d pools, want 1: %+v", len(ps), ps)
	}
	p := ps[0]
	if p.Name != "main" || p.Max != 7 || p.Open < 1 || p.InUse != 0 || p.Idle != p.Open {
		t.Errorf("pool %+v, want main with max 7, at least one connection open, all idle", p)
	}
}
