package httpapi_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/scimesh/scimesh/internal/testenv"
)

// TestOpenAPILint: docs/openapi.yaml passes Redocly's recommended rules
// with no errors (warnings are allowed). .ci/run installs the CLI.
func TestOpenAPILint(t *testing.T) {
	t.Parallel()
	redocly := os.Getenv("SCIMESH_REDOCLY")
	if redocly == "" {
		redocly, _ = exec.LookPath("redocly")
	}
	if redocly == "" {
		testenv.Missing(t, "redocly is not installed (npm install -g @redocly/cli@2.77.0, or set SCIMESH_REDOCLY)")
	}
	out, err := exec.CommandContext(t.Context(), redocly, "lint", "--format", "stylish", docsOpenAPI).CombinedOutput()
	if err != nil {
		t.Fatalf("redocly lint %s: %v\n%s", docsOpenAPI, err, out)
	}
}
