package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryLinksNoBenchOrTestCode: the scimesh binary, which users run,
// links none of the load generators (scimesh-bench has them), the
// throwaway PostgreSQL cluster they start, or the packages that exist for
// tests, as River's depguard rule keeps its own binaries clean.
func TestBinaryLinksNoBenchOrTestCode(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const mod = "github.com/scimesh/scimesh/"
	forbidden := []string{
		mod + "internal/bench", mod + "internal/pgcluster", mod + "internal/pgtest", mod + "internal/s3test",
		mod + "internal/slurmtest", mod + "internal/testenv", mod + "internal/store/storetest",
		mod + "internal/engine/enginetest", mod + "bench/", mod + "tests/", "github.com/valyala/fasthttp", "testing",
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps listed %d packages: %q", len(deps), deps)
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, strings.TrimSuffix(f, "/")+"/") {
				t.Errorf("the scimesh binary links %s", dep)
			}
		}
	}
}
