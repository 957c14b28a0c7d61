package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

func exerciseUploads(t *testing.T, newStore newFunc) {
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		want := &domain.Upload{
			ID: "0:u1", SHA256: strings.Repeat("ab", 32), Bytes: 1 << 33, Rows: 1<<31 + 7,
			BlobKey: strings.Repeat("cd", 32), BlobBytes: 1<<33 - 5, Owner: "ada.lab", CreatedAt: Epoch(),
		}
		if err := s.UploadInsert(t.Context(), want); err != nil {
			t.Fatal(err)
		}
		got, err := s.UploadGet(t.Context(), "0:u1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := structDiff(got, want); diff != "" {
			t.Errorf("UploadGet: %s", diff)
		}
		dup := *want
		dup.SHA256 = strings.Repeat("ef", 32)
		checkErr(t, "UploadInsert of a taken ID", s.UploadInsert(t.Context(), &dup), store.ErrDuplicate)
		if got, _ := s.UploadGet(t.Context(), "0:u1"); got.SHA256 != want.SHA256 {
			t.Errorf("a refused duplicate changed the upload: sha256 %s", got.SHA256)
		}
		_, err = s.UploadGet(t.Context(), "0:none")
		checkErr(t, "UploadGet of a missing upload", err, store.ErrNotFound)
	})
}

func exerciseTaskLogs(t *testing.T, newStore newFunc) {
	t.Run("AppendList", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		at := Epoch()
		appendLines := func(task string, attempt int, lines ...string) {
			t.Helper()
			err := s.TaskLogAppend(ctx, &store.TaskLogAppendParams{TaskID: task, Attempt: attempt, Lines: lines, Now: at, MaxLines: 1000})
			if err != nil {
				t.Fatalf("TaskLogAppend: %v", err)
			}
		}
		appendLines("a", 1, "first", "")
		appendLines("b", 1, "other task")
		appendLines("a", 2, "second ü", "third\twith tab")
		got, err := s.TaskLogList(ctx, &store.TaskLogListParams{TaskID: "a"})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"1 first", "1 ", "2 second ü", "2 third\twith tab"}
		if len(got) != len(want) {
			t.Fatalf("TaskLogList got %d lines, want %d: %+v", len(got), len(want), got)
		}
		for i, l := range got {
			if s := fmt.Sprintf("%d %s", l.Attempt, l.Line); s != want[i] {
				t.Errorf("line %d = %q, want %q", i, s, want[i])
			}
			if !l.Time.Equal(at) || l.Time.Location() != time.UTC {
				t.Errorf("line %d time %v, want %v UTC", i, l.Time, at)
			}
			if i > 0 && l.ID <= got[i-1].ID {
				t.Errorf("line IDs not increasing: %d after %d", l.ID, got[i-1].ID)
			}
		}
		page, err := s.TaskLogList(ctx, &store.TaskLogListParams{TaskID: "a", After: got[0].ID, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) != 2 || page[0].ID != got[1].ID || page[1].ID != got[2].ID {
			t.Errorf("page after the first line, limit 2: %+v", page)
		}
		none, err := s.TaskLogList(ctx, &store.TaskLogListParams{TaskID: "missing"})
		if err != nil || len(none) != 0 {
			t.Errorf("log of a task with none: %v, %v", none, err)
		}
	})
	t.Run("Cap", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		for _, batch := range [][]string{{"1", "2", "3"}, {"4", "5", "6"}, {"7"}} {
			err := s.TaskLogAppend(ctx, &store.TaskLogAppendParams{TaskID: "t", Attempt: 1, Lines: batch, Now: Epoch(), MaxLines: 5})
			if err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.TaskLogList(ctx, &store.TaskLogListParams{TaskID: "t"})
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range got {
			lines = append(lines, l.Line)
		}
		if strings.Join(lines, ",") != "1,2,3,4,5" {
			t.Errorf("log capped at 5 lines holds %v, want the first five", lines)
		}
	})
	t.Run("Offset", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		send := func(attempt int, offset *int64, lines ...string) {
			t.Helper()
			err := s.TaskLogAppend(ctx, &store.TaskLogAppendParams{TaskID: "t", Attempt: attempt, Lines: lines, Offset: offset, Now: Epoch(), MaxLines: 1000})
			if err != nil {
				t.Fatalf("TaskLogAppend(attempt %d, offset %v): %v", attempt, offset, err)
			}
		}
		at := func(n int64) *int64 { return &n }
		send(1, at(0), "a", "b")
		send(1, at(0), "a", "b")   // the same batch again: stored once
		send(1, at(1), "b", "c")   // overlapping: only the new line
		send(1, at(5), "f")        // after a gap (lines lost on the way): kept
		send(1, at(3), "d", "e")   // before the last stored: skipped
		send(1, at(5), "f")        // again
		send(2, at(0), "a2")       // another attempt numbers its own lines
		send(1, nil, "unnumbered") // no offset: appended, as before
		send(1, nil, "unnumbered") // twice
		send(1, at(6), "g")        // numbering goes on past unnumbered lines
		send(1, at(6), "g", "h")   // and a longer retry adds what is new
		got, err := s.TaskLogList(ctx, &store.TaskLogListParams{TaskID: "t"})
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range got {
			lines = append(lines, fmt.Sprintf("%d:%s", l.Attempt, l.Line))
		}
		want := "1:a,1:b,1:c,1:f,2:a2,1:unnumbered,1:unnumbered,1:g,1:h"
		if strings.Join(lines, ",") != want {
			t.Errorf("log holds %v, want %s", lines, want)
		}
	})
	t.Run("InTx", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		boom := fmt.Errorf("boom")
		err := s.InTx(ctx, func(q store.Querier) error {
			if err := q.TaskLogAppend(ctx, &store.TaskLogAppendParams{TaskID: "t", Attempt: 1, Lines: []string{"x"}, Now: Epoch(), MaxLines: 5}); err != nil {
				return err
			}
			return boom
		})
		if err != boom {
			t.Fatalf("InTx = %v, want fn's error", err)
		}
		if got, _ := s.TaskLogList(ctx, &store.TaskLogListParams{TaskID: "t"}); len(got) != 0 {
			t.Errorf("a rolled back append left %d lines", len(got))
		}
	})
}
