package postgres_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/storetest"
)

func TestUpload(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t)
	u := &domain.Upload{ID: "0:u1", SHA256: "ab", Bytes: 1 << 33, Rows: 12, BlobKey: "cd", BlobBytes: 99,
		CreatedAt: storetest.Epoch()}
	if err := s.UploadInsert(ctx, u); err != nil {
		t.Fatal(err)
	}
	got, err := s.UploadGet(ctx, "0:u1")
	if err != nil {
		t.Fatal(err)
	}
	if *got != *u {
		t.Errorf("UploadGet = %+v, want %+v", got, u)
	}
	if err := s.UploadInsert(ctx, u); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("UploadInsert of a taken ID: got %v, want ErrDuplicate", err)
	}
	if _, err := s.UploadGet(ctx, "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UploadGet(missing): got %v, want ErrNotFound", err)
	}
}

func TestTaskLog(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t)
	at := storetest.Epoch()
	appendLines := func(task string, attempt int, max int, lines ...string) {
		t.Helper()
		err := s.TaskLogAppend(ctx, &store.TaskLogAppendParams{TaskID: task, Attempt: attempt, Lines: lines, Now: at, MaxLines: max})
		if err != nil {
			t.Fatalf("TaskLogAppend: %v", err)
		}
	}
	list := func(task string, after int64, limit int) []domain.LogLine {
		t.Helper()
		got, err := s.TaskLogList(ctx, &store.TaskLogListParams{TaskID: task, After: after, Limit: limit})
		if err != nil {
			t.Fatalf("TaskLogList: %v", err)
		}
		return got
	}
	appendLines("a", 1, 5, "one", "two\x00with NUL", "\xff not UTF-8")
	appendLines("b", 1, 5, "other task")
	appendLines("a", 2, 5, "three", "four", "five", "six: over the cap")
	appendLines("a", 2, 5, "seven: over the cap")

	got := list("a", 0, 0)
	want := []string{"one", "two\x00with NUL", "\xff not UTF-8", "three", "four"}
	if len(got) != len(want) {
		t.Fatalf("the log holds %d lines, want %d: %+v", len(got), len(want), got)
	}
	for i, l := range got {
		if l.Line != want[i] || !l.Time.Equal(at) || l.Time.Location() != time.UTC {
			t.Errorf("line %d = %q at %v, want %q at %v", i, l.Line, l.Time, want[i], at)
		}
		if i > 0 && l.ID <= got[i-1].ID {
			t.Errorf("line %d has ID %d after %d; IDs must increase", i, l.ID, got[i-1].ID)
		}
		if wantAttempt := 1 + i/3; l.Attempt != wantAttempt {
			t.Errorf("line %d has attempt %d, want %d", i, l.Attempt, wantAttempt)
		}
	}
	page := list("a", got[1].ID, 2)
	if len(page) != 2 || page[0].ID != got[2].ID || page[1].ID != got[3].ID {
		t.Errorf("the page after line 1, limit 2 = %+v; want lines 2 and 3", page)
	}
	if rest := list("a", got[4].ID, 10); len(rest) != 0 {
		t.Errorf("lines after the last = %+v, want none", rest)
	}
	if other := list("b", 0, 10); len(other) != 1 || other[0].Line != "other task" {
		t.Errorf("the other task's log = %+v", other)
	}
}

// TestTaskLogConcurrentAppends checks that the cap holds when many
// appends to one task race.
func TestTaskLogConcurrentAppends(t *testing.T) {
	t.Parallel()
	const appenders, each, maxLines = 16, 10, 50
	ctx := t.Context()
	s, _ := openURL(t, "pool_max_conns=20")
	var wg sync.WaitGroup
	errs := make(chan error, appenders)
	for a := range appenders {
		wg.Go(func() {
			lines := make([]string, each)
			for i := range lines {
				lines[i] = fmt.Sprintf("appender %d line %d", a, i)
			}
			errs <- s.TaskLogAppend(ctx, &store.TaskLogAppendParams{TaskID: "t", Attempt: 1, Lines: lines,
				Now: storetest.Epoch(), MaxLines: maxLines})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	got, err := s.TaskLogList(ctx, &store.TaskLogListParams{TaskID: "t", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != maxLines {
		t.Errorf("the log holds %d lines after racing appends, want the cap %d", len(got), maxLines)
	}
}
