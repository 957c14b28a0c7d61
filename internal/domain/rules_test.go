package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"
)

func validSpec() *JobSpec {
	return &JobSpec{
		Workload:     "tanimoto",
		Parameters:   json.RawMessage(`{"query":"ff"}`),
		Chunks:       []ChunkRef{{URI: "https://example.org/c0.csv", SHA256: strings.Repeat("a", 64)}},
		ChunkRows:    DefaultChunkRows,
		HasHeader:    true,
		TopK:         DefaultTopK,
		ScoreColumn:  DefaultScoreColumn,
		Order:        Desc,
		MaxAttempts:  DefaultMaxAttempts,
		LeaseSeconds: DefaultLeaseSeconds,
	}
}

// paramsOfSize returns a JSON object of exactly n bytes (n >= 8), compact.
func paramsOfSize(n int) json.RawMessage {
	return json.RawMessage(`{"q":"` + strings.Repeat("a", n-8) + `"}`)
}

func TestJobSpecValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(*JobSpec)
		want   string // substring of the error; "" for valid
	}{
		{"valid", func(*JobSpec) {}, ""},
		{"bounds low", func(s *JobSpec) { s.ChunkRows, s.TopK = 1, 1 }, ""},
		{"bounds high", func(s *JobSpec) { s.ChunkRows, s.TopK, s.Priority = MaxChunkRows, MaxTopK, MaxPriority }, ""},
		{"no workload", func(s *JobSpec) { s.Workload = "" }, "workload is required"},
		{"bad workload", func(s *JobSpec) { s.Workload = "rm -rf /" }, "workload"},
		{"params array", func(s *JobSpec) { s.Parameters = json.RawMessage(`[1]`) }, "parameters must be a JSON object"},
		{"params invalid", func(s *JobSpec) { s.Parameters = json.RawMessage(`{`) }, "parameters must be a JSON object"},
		{"params at the limit", func(s *JobSpec) { s.Parameters = paramsOfSize(MaxParametersBytes) }, ""},
		{"params over the limit", func(s *JobSpec) { s.Parameters = paramsOfSize(MaxParametersBytes + 1) }, "65537 bytes as compact JSON; at most 65536"},
		{"params whitespace not counted", func(s *JobSpec) {
			s.Parameters = append(append([]byte("{ \n"), bytes.Repeat([]byte(" "), MaxParametersBytes)...), paramsOfSize(100)[1:]...)
		}, ""},
		{"chunk_rows 0", func(s *JobSpec) { s.ChunkRows = 0 }, "chunk_rows is 0"},
		{"chunk_rows huge", func(s *JobSpec) { s.ChunkRows = MaxChunkRows + 1 }, "chunk_rows"},
		{"top_k 0", func(s *JobSpec) { s.TopK = 0 }, "top_k is 0"},
		{"top_k huge", func(s *JobSpec) { s.TopK = MaxTopK + 1 }, "top_k"},
		{"max_attempts 0", func(s *JobSpec) { s.MaxAttempts = 0 }, "max_attempts"},
		{"max_attempts 101", func(s *JobSpec) { s.MaxAttempts = 101 }, "max_attempts"},
		{"lease 4", func(s *JobSpec) { s.LeaseSeconds = 4 }, "lease_seconds"},
		{"lease 3601", func(s *JobSpec) { s.LeaseSeconds = 3601 }, "lease_seconds"},
		{"priority -1001", func(s *JobSpec) { s.Priority = -1001 }, "priority"},
		{"priority 1001", func(s *JobSpec) { s.Priority = 1001 }, "priority"},
		{"timeout bounds", func(s *JobSpec) { s.TimeoutSeconds = MaxTimeoutSeconds }, ""},
		{"timeout -1", func(s *JobSpec) { s.TimeoutSeconds = -1 }, "timeout_seconds is -1; it must be between 0 (no timeout) and 604800"},
		{"timeout 604801", func(s *JobSpec) { s.TimeoutSeconds = 604801 }, "timeout_seconds is 604801; it must be between 0"},
		{"order", func(s *JobSpec) { s.Order = "up" }, "order"},
		{"score column", func(s *JobSpec) { s.ScoreColumn = "" }, "score_column"},
		{"no chunks", func(s *JobSpec) { s.Chunks = nil }, "at least one chunk"},
		{"chunk uri", func(s *JobSpec) { s.Chunks[0].URI = "" }, "chunks[0].uri"},
		{"chunk uri not http", func(s *JobSpec) { s.Chunks[0].URI = "file:///etc/passwd" }, "chunks[0].uri"},
		{"chunk sha", func(s *JobSpec) { s.Chunks[0].SHA256 = "ABC" }, "chunks[0].sha256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSpec()
			tt.mutate(s)
			err := s.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want ErrInvalidArgument containing %q", err, tt.want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		attempt  int
		jitter   float64
		want     time.Duration
		wantNote string
	}{
		{1, 1, time.Second, "2^0 s at full factor"},
		{1, 0, 500 * time.Millisecond, "half at jitter 0"},
		{2, 1, 2 * time.Second, ""},
		{4, 1, 8 * time.Second, ""},
		{9, 1, 256 * time.Second, ""},
		{10, 1, 300 * time.Second, "capped"},
		{60, 1, 300 * time.Second, "capped, no overflow"},
		{60, 0, 150 * time.Second, "capped, half"},
		{3, 0.5, 3 * time.Second, "4 s × 0.75"},
	}
	for _, tt := range tests {
		if got := Backoff(tt.attempt, tt.jitter); got != tt.want {
			t.Errorf("Backoff(%d, %v) = %v, want %v %s", tt.attempt, tt.jitter, got, tt.want, tt.wantNote)
		}
	}
}

func leased(now time.Time) *Task {
	return &Task{
		ID: "s0:t", State: TaskLeased, Attempt: 2, MaxAttempts: 3, LeaseSeconds: 60,
		LeaseOwner: "w1", LeaseExpiresAt: now.Add(time.Minute),
	}
}

func TestCheckLease(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name    string
		mutate  func(*Task)
		worker  string
		attempt int
		want    error
	}{
		{"holder", func(*Task) {}, "w1", 2, nil},
		{"other worker", func(*Task) {}, "w2", 2, ErrLeaseLost},
		{"stale attempt", func(*Task) {}, "w1", 1, ErrLeaseLost},
		{"expired", func(t *Task) { t.LeaseExpiresAt = now }, "w1", 2, ErrLeaseLost},
		{"back to pending", func(t *Task) { t.State = TaskPending }, "w1", 2, ErrLeaseLost},
		{"cancelled", func(t *Task) { t.State = TaskCancelled }, "w1", 2, ErrCancelled},
		{"failed", func(t *Task) { t.State = TaskFailed }, "w1", 2, ErrCancelled},
	}
	for _, tt := range tests {
		task := leased(now)
		tt.mutate(task)
		err := CheckLease(task, tt.worker, tt.attempt, now)
		if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
			t.Errorf("%s: CheckLease = %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestComplete(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	task := leased(now)
	out := []byte("id,score\na,1\n")
	got, err := Complete(task, "w1", 2, out, nil, now)
	if err != nil || got != Completed || task.State != TaskCompleted || !task.FinishedAt.Equal(now) {
		t.Fatalf("Complete = %v, %v; state %s finished %v", got, err, task.State, task.FinishedAt)
	}
	// The same result from the same attempt is a replay that changes nothing.
	before := *task
	got, err = Complete(task, "w1", 2, out, nil, now.Add(time.Hour))
	if err != nil || got != Replayed || !task.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("replay = %v, %v; updated %v, want unchanged %v", got, err, task.UpdatedAt, before.UpdatedAt)
	}
	if _, err := Complete(task, "w1", 2, []byte("id,score\nb,2\n"), nil, now); !errors.Is(err, ErrConflict) {
		t.Fatalf("different result = %v, want ErrConflict", err)
	}
	if _, err := Complete(task, "w9", 1, out, nil, now); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("same result, other attempt = %v, want ErrLeaseLost", err)
	}
}

func TestRetry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	task := leased(now) // attempt 2 of 3
	if final := Retry(task, "boom", true, 4*time.Second, now); final {
		t.Fatal("attempt 2 of 3 failed for good, want a retry")
	}
	if task.State != TaskPending || !task.RunAfter.Equal(now.Add(4*time.Second)) || task.Error != "boom" || !task.LeaseExpiresAt.IsZero() {
		t.Fatalf("after retry: state %s run_after %v error %q lease %v", task.State, task.RunAfter, task.Error, task.LeaseExpiresAt)
	}
	task = leased(now)
	if final := Retry(task, "bad input", false, 0, now); !final || task.State != TaskFailed || !task.FinishedAt.Equal(now) {
		t.Fatalf("non-retryable: final %v state %s", final, task.State)
	}
	task = leased(now)
	task.Attempt = 3
	if final := Retry(task, "boom", true, 0, now); !final || task.State != TaskFailed {
		t.Fatalf("last attempt: final %v state %s", final, task.State)
	}
}

func TestTaskCounts(t *testing.T) {
	t.Parallel()
	var c TaskCounts
	c.Add(TaskCompleted, 3)
	c.Add(TaskPending, 1)
	if c.Total != 4 || c.Progress() != 0.75 {
		t.Fatalf("counts %+v progress %v, want total 4 progress 0.75", c, c.Progress())
	}
	if (TaskCounts{}).Progress() != 0 {
		t.Fatal("empty progress not 0")
	}
}

// TestValidName checks the names workloads and worker IDs take against the
// pattern the API documents, ^[A-Za-z0-9._:-]{1,128}$, on edge cases and
// on every string of up to two bytes from a set that mixes allowed and
// refused characters.
func TestValidName(t *testing.T) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
	cases := []string{"", "a", "w-1", "Z.9_x:y", strings.Repeat("a", 128), strings.Repeat("a", 129),
		"a b", "a\n", "\na", "a/b", "é", "a\x00", "-", "..", "x\u00e9y"}
	set := []byte("aZ09._:-/ \n\x00\xff@[`{")
	for _, a := range set {
		cases = append(cases, string([]byte{a}))
		for _, b := range set {
			cases = append(cases, string([]byte{a, b}))
		}
	}
	for _, c := range cases {
		if got, want := ValidWorkerID(c), pattern.MatchString(c); got != want {
			t.Errorf("ValidWorkerID(%q) = %v; the pattern says %v", c, got, want)
		}
		if got, want := ValidWorkload(c), pattern.MatchString(c); got != want {
			t.Errorf("ValidWorkload(%q) = %v; the pattern says %v", c, got, want)
		}
	}
}

func TestValidateSpeculateAfter(t *testing.T) {
	for _, c := range []struct {
		v  *float64
		ok bool
	}{{nil, true}, {ptr(0.0), true}, {ptr(1.0), true}, {ptr(3.5), true}, {ptr(100.0), true},
		{ptr(0.5), false}, {ptr(-1.0), false}, {ptr(100.5), false}, {ptr(math.NaN()), false}, {ptr(math.Inf(1)), false}} {
		s := validSpec()
		s.SpeculateAfter = c.v
		err := s.Validate()
		if (err == nil) != c.ok {
			t.Errorf("speculate_after %v: Validate() = %v, want ok %v", c.v, err, c.ok)
		}
	}
}

func ptr[T any](v T) *T { return &v }
