package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
)

// A job setting out of its bounds is 400 invalid_argument, and the message
// names the setting and its bounds; nothing is created.
func TestJobSettingBounds(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens, noLoops: true})
	// {"q":"…"} of exactly n bytes as compact JSON.
	params := func(n int) map[string]any { return map[string]any{"q": strings.Repeat("a", n-8)} }
	tests := []struct {
		name  string
		extra map[string]any
		want  []string // substrings of the message
	}{
		{"timeout -1", map[string]any{"timeout_seconds": -1}, []string{"timeout_seconds is -1", "between 0", "604800"}},
		{"timeout 604801", map[string]any{"timeout_seconds": 604801}, []string{"timeout_seconds is 604801", "between 0", "604800"}},
		{"timeout not an integer", map[string]any{"timeout_seconds": 1.5}, []string{"timeout_seconds"}},
		{"speculate_after 0.5", map[string]any{"speculate_after": 0.5}, []string{"speculate_after is 0.5", "0 (no backups)", "between 1 and 100"}},
		{"speculate_after 101", map[string]any{"speculate_after": 101}, []string{"speculate_after is 101"}},
		{"speculate_after not a number", map[string]any{"speculate_after": "3"}, []string{"speculate_after"}},
		{"parameters of 64 KiB + 1", map[string]any{"parameters": params(domain.MaxParametersBytes + 1)},
			[]string{"parameters", "65537 bytes", "at most 65536", "input"}},
	}
	for _, tt := range tests {
		r := b.client("POST", "/jobs", jobBody(1, tt.extra))
		if r.status != http.StatusBadRequest || r.errCode() != "invalid_argument" {
			t.Errorf("%s: %s, want 400 invalid_argument", tt.name, r)
			continue
		}
		for _, w := range tt.want {
			if msg := errMessage(r); !strings.Contains(msg, w) {
				t.Errorf("%s: message %q does not say %q", tt.name, msg, w)
			}
		}
	}
	var list struct{ Jobs []job }
	b.mustStatus(b.client("GET", "/jobs", nil), http.StatusOK).decode(t, &list)
	if len(list.Jobs) != 0 {
		t.Fatalf("refused requests created %d jobs", len(list.Jobs))
	}
	// At the limits, and larger only by whitespace, is fine.
	b.createJob(1, map[string]any{"parameters": params(domain.MaxParametersBytes)})
	b.createJob(1, map[string]any{"timeout_seconds": 604800})
	b.createJob(1, map[string]any{"timeout_seconds": 0})
	for extra, want := range map[string]float64{"": 3, "0": 0, "1": 1, "2.5": 2.5, "100": 100} {
		body := map[string]any{}
		if extra != "" {
			body["speculate_after"] = json.Number(extra)
		}
		if j := b.createJob(1, body); j.SpeculateAfter == nil || *j.SpeculateAfter != want {
			t.Errorf("speculate_after %q: the job says %v, want %v", extra, j.SpeculateAfter, want)
		}
	}
	spaced := `{"workload":"tanimoto","input":{"chunks":[{"uri":"https://x.org/c","sha256":"` + strings.Repeat("0", 64) +
		`"}]},"parameters":{"q":   ` + strings.Repeat(" ", domain.MaxParametersBytes) + `"x"}}`
	b.mustStatus(b.client("POST", "/jobs", spaced), http.StatusCreated)
}
