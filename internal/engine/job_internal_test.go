package engine

import (
	"encoding/json"
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
)

// A job request's hash, which an Idempotency-Key replay is compared
// against, is stored with the job: a new setting left at its default must
// not change it, or replaying a request made before the setting existed
// would be 409. The hash below was computed before timeout_seconds existed.
func TestSpecHashStableAcrossNewSettings(t *testing.T) {
	t.Parallel()
	spec := &domain.JobSpec{
		Name: "n", Workload: "tanimoto", Parameters: json.RawMessage(`{ "query": "ff" }`),
		UploadID: "s0:u1", ChunkRows: 10, HasHeader: true, TopK: 5, ScoreColumn: "score",
		Order: domain.Desc, MaxAttempts: 3, LeaseSeconds: 120, Priority: 1,
	}
	got, err := specHash(spec)
	if err != nil {
		t.Fatal(err)
	}
	const want = "87a10dfd4d5b8eb2f21ae87d63b8c73c4cd2136d7de5f984ba06182ae4cfdf26"
	if got != want {
		t.Errorf("specHash = %s, want %s", got, want)
	}
	spec.TimeoutSeconds = 60
	if other, _ := specHash(spec); other == want {
		t.Error("a timeout_seconds of 60 hashes like none: a replay with another timeout would not be refused")
	}
}
