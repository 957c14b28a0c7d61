package httpapi

import (
	"errors"
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
)

// FuzzDecodeJob feeds arbitrary bodies to the job decoder: it never panics,
// and whatever it refuses is refused as a client error.
func FuzzDecodeJob(f *testing.F) {
	f.Add([]byte(`{"workload":"w","input":{"chunks":[{"uri":"https://a.org/x","sha256":"` + sha + `"}]}}`))
	f.Add([]byte(`{"workload":"w","top_k":0,"input":{"upload_id":"s0:x"}}`))
	f.Add([]byte(`{"parameters":[1],"input":{}}`))
	f.Add([]byte(`{"workload":"w","input":{"chunks":[]}} {}`))
	f.Add([]byte(`{"priority":1e400}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req createJobRequest
		if err := decodeBytes(body, &req); err != nil {
			if !errors.Is(err, domain.ErrInvalidArgument) {
				t.Fatalf("decode error %v is not invalid_argument", err)
			}
			return
		}
		s, err := req.spec()
		if err == nil {
			err = s.Validate()
		}
		if err != nil && !errors.Is(err, domain.ErrInvalidArgument) && !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("refused with %v, want a client error", err)
		}
	})
}

// FuzzDecodeWorker feeds arbitrary bodies to the worker request decoders.
func FuzzDecodeWorker(f *testing.F) {
	f.Add([]byte(`{"worker_id":"w","workloads":["a"],"wait_seconds":1.5,"max_tasks":3}`))
	f.Add([]byte(`{"worker_id":"w","attempt":1,"output":"id,score\n"}`))
	f.Add([]byte(`{"results":[{"task_id":"t","worker_id":"w","attempt":1,"output":"x"}]}`))
	f.Add([]byte(`{"worker_id":"w","attempt":1,"error":"e","retryable":false}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var c claimRequest
		var r resultRequest
		var fr failureRequest
		var batch struct {
			Results []resultRequest `json:"results"`
		}
		for _, v := range []any{&c, &r, &fr, &batch} {
			if err := decodeBytes(body, v); err != nil && !errors.Is(err, domain.ErrInvalidArgument) {
				t.Fatalf("decode error %v is not invalid_argument", err)
			}
		}
		if _, err := r.params("t"); err != nil && !errors.Is(err, domain.ErrInvalidArgument) {
			t.Fatalf("params error %v is not invalid_argument", err)
		}
	})
}

const sha = "0000000000000000000000000000000000000000000000000000000000000000"
