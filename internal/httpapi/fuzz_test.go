package httpapi

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"math"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

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

// FuzzDecodeLikeStdlib holds decodeBytes, which decodes with
// segmentio/encoding/json, to encoding/json's verdicts: the same bodies
// accepted, with the same values. (A refusal's words are encoding/json's
// by construction: decodeBytes hands every body it refuses to decodeStd.)
func FuzzDecodeLikeStdlib(f *testing.F) {
	for _, s := range []string{
		`{"worker_id":"w","workloads":["a"],"wait_seconds":1.5,"max_tasks":3}`,
		`{"results":[{"task_id":"t","worker_id":"w","attempt":1,"output":"x\n","metrics":{"a":[1,2.5e3,null]}}]}`,
		`{"workload":"w","parameters":{"q":"\u00e9\ud83d\ude00"},"input":{"chunks":[{"uri":"https://a.org/x","sha256":"` + sha + `"}]}}`,
		`{"worker_id": 5}`, `{"max_tasks": "x"}`, `{"max_tasks": 1.5}`, `{"max_tasks": 1e2}`, `{"max_tasks": 99999999999999999999}`,
		`{"x": 1}`, `{"worker_id": "a"`, `{"worker_id": "a"} x`, `{"worker_id": "a"} {}`, `[1]`, `"s"`, `nul`, `{,}`,
		`{"workloads": [1]}`, `{"worker_id": "\ud800"}`, "{\"worker_id\": \"a\xffb\"}", "{\"worker_id\":\"\t\"}",
		`{"WORKER_ID": "x"}`, `{"worker_id": "a", "worker_id": "b"}`, ` {"max_tasks": 01}`, `{"wait_seconds": -1e400}`,
		`{"worker_id": null, "workloads": null}`, `{"priority":1e400}`, `{"input":{"chunks":[{"uri":1}]}}`, "  \n",
		"{\"worker_id\":\"a\"}\f", "{\"worker_id\":\"a\"}\v", "{\"worker_id\":\"a\"}\u00a0", "{\"worker_id\":\"a\"}\u3000", "\f{}", "{\"worker_id\":\"a\"} \t\r\n",
	} {
		f.Add([]byte(s))
	}
	type batchRequest struct {
		Results []resultRequest `json:"results"`
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, pair := range [][2]any{
			{&claimRequest{}, &claimRequest{}}, {&resultRequest{}, &resultRequest{}},
			{&batchRequest{}, &batchRequest{}}, {&createJobRequest{}, &createJobRequest{}},
		} {
			got, want := decodeBytes(body, pair[0]), decodeStd(body, pair[1])
			if (got == nil) != (want == nil) {
				t.Fatalf("%T from %q: %v; encoding/json says %v", pair[0], body, got, want)
			}
			if got == nil && !reflect.DeepEqual(pair[0], pair[1]) {
				t.Fatalf("%T from %q: %+v; encoding/json decodes %+v", pair[0], body, pair[0], pair[1])
			}
		}
	})
}

// FuzzEncodeLikeStdlib holds writeJSON's encoder, segmentio's, to the bytes
// encoding/json writes, on the kinds of values the API's answers hold:
// strings of any bytes (HTML, control characters, invalid UTF-8), raw JSON
// as a client gave it, numbers, times, maps, nil and empty slices.
func FuzzEncodeLikeStdlib(f *testing.F) {
	f.Add("id,score\na,1\n", []byte(`{"q": "x", "n": [1, 2.50, -0.0e1]}`), 1.5, int64(1764600000123456789))
	f.Add("<a href='x'>&amp;</a>\u2028\u2029\x00\x1f\xff\xfe", []byte(" [ true , null ] "), math.Copysign(0, -1), int64(0))
	f.Add("\U0001F600 é", []byte(`"\u00e9\/\ud83d\ude00"`), 1e21, int64(-62135596800000000))
	f.Add("", []byte(`{}`), 123456789.0, int64(1))
	f.Fuzz(func(t *testing.T, s string, raw []byte, x float64, nanos int64) {
		if !stdjson.Valid(raw) || math.IsInf(x, 0) || math.IsNaN(x) {
			return // not what an answer holds: JSON given is checked, scores are finite
		}
		type inner struct {
			S   string            `json:"s,omitempty"`
			Ptr *string           `json:"ptr"`
			Map map[string]string `json:"map,omitempty"`
		}
		v := struct {
			S     string             `json:"s"`
			B     []byte             `json:"b"`
			Raw   stdjson.RawMessage `json:"raw"`
			F     float64            `json:"f"`
			F32   float32            `json:"f32"`
			T     time.Time          `json:"t"`
			TP    *time.Time         `json:"tp,omitempty"`
			L     []string           `json:"l"`
			E     []int              `json:"e"`
			In    inner              `json:"in"`
			InP   *inner             `json:"inp"`
			M     map[string]any     `json:"m"`
			Omit  int                `json:"omit,omitempty"`
			Inner []inner            `json:"inner"`
		}{
			S: s, B: []byte(s), Raw: raw, F: x, F32: float32(x), T: time.Unix(0, nanos).UTC(), L: []string{s, ""}, E: []int{},
			In: inner{S: s, Ptr: &s, Map: map[string]string{s: s, "b": "<"}}, M: map[string]any{"k": x, s: []any{nil, s}},
			Inner: []inner{{}, {S: s}},
		}
		if nanos%2 == 0 {
			v.TP = &v.T
		}
		var want bytes.Buffer
		if err := stdjson.NewEncoder(&want).Encode(v); err != nil {
			return // a time out of JSON's range: encoding/json refuses it, and no answer holds one
		}
		got := httptest.NewRecorder()
		writeJSON(got, 200, v)
		if got.Body.String() != want.String() {
			t.Fatalf("writeJSON wrote\n%s\nencoding/json writes\n%s", got.Body.String(), want.String())
		}
	})
}
