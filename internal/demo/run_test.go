package demo

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that Run leaves no goroutine behind: the coordinator
// and the workers it starts stop when it returns.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs a small demo end to end in this process: the distributed
// result must equal the direct one, which Run checks byte for byte.
func TestRun(t *testing.T) {
	t.Parallel()
	var stdout, stderr strings.Builder
	c := Config{Data: Data{Rows: 3000, Bits: 256, Density: 0.1, Seed: 7}, Workers: 2, ChunkRows: 500, TopK: 5}
	if err := Run(t.Context(), &stdout, &stderr, c); err != nil {
		t.Fatalf("Run: %v\nstderr:\n%s", err, stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "check: the result equals the direct computation, byte for byte") {
		t.Fatalf("no passed check in the output:\n%s", out)
	}
	if !strings.Contains(out, "distributed (upload, 6 chunks, 2 workers, stitch)") {
		t.Errorf("the output does not count 6 chunks and 2 workers:\n%s", out)
	}
	if n := strings.Count(out, "\nmol-"); n != 5 {
		t.Errorf("%d rows of fingerprints in the top 5:\n%s", n, out)
	}
}

func TestRunRefusesBadConfig(t *testing.T) {
	t.Parallel()
	good := Config{Data: Data{Rows: 10, Bits: 64, Density: 0.1, Seed: 1}, Workers: 1, ChunkRows: 5, TopK: 1}
	for _, bad := range []func(*Config){
		func(c *Config) { c.Rows = 0 },
		func(c *Config) { c.Bits = 12 },
		func(c *Config) { c.Workers = 0 },
		func(c *Config) { c.Density = 1 },
		func(c *Config) { c.TopK = 0 },
	} {
		c := good
		bad(&c)
		var out strings.Builder
		if err := Run(t.Context(), &out, &out, c); err == nil || !strings.Contains(err.Error(), "demo: need") {
			t.Errorf("Run(%+v): %v, want the demo's bounds", c, err)
		}
	}
}
