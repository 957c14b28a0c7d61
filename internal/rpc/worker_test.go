package rpc_test

import (
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
)

// lease submits a one-task tree and leases its task to worker w1.
func (b *bundle) lease(t *testing.T) *v1.Task {
	t.Helper()
	sub, err := b.queue.Submit(t.Context(), connect.NewRequest(&v1.SubmitRequest{Tasks: []*v1.TaskSpec{{Id: "s0:x", Workload: "w"}}}))
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	res, err := b.worker.Poll(t.Context(), connect.NewRequest(&v1.PollRequest{WorkerId: "w1"}))
	if err != nil {
		t.Fatalf("Poll: %v", err)
	}
	if res.Msg.TaskId != sub.Msg.RootId || res.Msg.Attempt != 1 {
		t.Fatalf("Poll leased %q attempt %d, want %q attempt 1", res.Msg.TaskId, res.Msg.Attempt, sub.Msg.RootId)
	}
	return res.Msg
}

// log sends lines of the leased task's attempt through Worker.Log, with
// offset unless it is nil.
func (b *bundle) log(t *testing.T, tk *v1.Task, offset *int64, lines ...string) error {
	t.Helper()
	_, err := b.worker.Log(t.Context(), connect.NewRequest(&v1.LogRequest{
		TaskId: tk.TaskId, WorkerId: "w1", Attempt: tk.Attempt, Lines: lines, Offset: offset,
	}))
	return err
}

// mustLog is log that fails the test on an error.
func (b *bundle) mustLog(t *testing.T, tk *v1.Task, offset *int64, lines ...string) {
	t.Helper()
	if err := b.log(t, tk, offset, lines...); err != nil {
		t.Fatalf("Log at offset %v of %q: %v", offset, lines, err)
	}
}

// logLines reads a task's log back through Queue.GetLogs, in order; every
// chunk must be of attempt 1.
func (b *bundle) logLines(t *testing.T, taskID string) []string {
	t.Helper()
	stream, err := b.queue.GetLogs(t.Context(), connect.NewRequest(&v1.GetLogsRequest{TaskId: taskID}))
	if err != nil {
		t.Fatalf("GetLogs: %v", err)
	}
	defer stream.Close()
	var lines []string
	for stream.Receive() {
		if c := stream.Msg(); c.Attempt != 1 || c.TaskId != taskID {
			t.Fatalf("GetLogs sent a chunk of task %q attempt %d, want %q attempt 1", c.TaskId, c.Attempt, taskID)
		}
		lines = append(lines, stream.Msg().Lines...)
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("GetLogs: %v", err)
	}
	return lines
}

// TestWorkerLogOffsetStoresOnce sends log batches with offsets through
// Worker.Log as a worker does when answers are lost: the same batch twice,
// a batch overlapping what is stored, and an older batch after a newer
// one. Each line is stored once, in the order of its position.
func TestWorkerLogOffsetStoresOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tk := b.lease(t)
	b.mustLog(t, tk, proto.Int64(0), "one", "two")
	b.mustLog(t, tk, proto.Int64(0), "one", "two")    // the answer to the first was lost
	b.mustLog(t, tk, proto.Int64(1), "two", "three")  // overlaps: "two" is held
	b.mustLog(t, tk, proto.Int64(3), "four", "five")  // the next batch
	b.mustLog(t, tk, proto.Int64(2), "three", "four") // all held already
	b.mustLog(t, tk, proto.Int64(5), "six")
	want := []string{"one", "two", "three", "four", "five", "six"}
	if got := b.logLines(t, tk.TaskId); !slices.Equal(got, want) {
		t.Fatalf("log %q, want %q: each line once, in order", got, want)
	}
}

// TestWorkerLogNegativeOffset checks that a negative offset is refused as
// an invalid argument and stores none of the batch's lines.
func TestWorkerLogNegativeOffset(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tk := b.lease(t)
	err := b.log(t, tk, proto.Int64(-1), "bad")
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("Log at offset -1: %v, want InvalidArgument naming the offset", err)
	}
	if got := b.logLines(t, tk.TaskId); len(got) != 0 {
		t.Fatalf("log %q after a refused batch, want it empty", got)
	}
	b.mustLog(t, tk, proto.Int64(0), "good") // the attempt's log still starts at 0
	if got := b.logLines(t, tk.TaskId); !slices.Equal(got, []string{"good"}) {
		t.Fatalf("log %q, want [good]", got)
	}
}

// TestWorkerLogWithoutOffset checks that a batch without an offset (an
// older worker) is appended every time it is sent, as before offsets.
func TestWorkerLogWithoutOffset(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tk := b.lease(t)
	b.mustLog(t, tk, nil, "a", "b")
	b.mustLog(t, tk, nil, "a", "b")
	want := []string{"a", "b", "a", "b"}
	if got := b.logLines(t, tk.TaskId); !slices.Equal(got, want) {
		t.Fatalf("log %q, want %q: each batch appended", got, want)
	}
}
