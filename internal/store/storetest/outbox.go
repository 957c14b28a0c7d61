package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// outboxMsg returns a message to shard due at next (zero: given up on),
// created an hour before Epoch.
func outboxMsg(shard, kind string, next time.Time) *store.OutboxMessage {
	return &store.OutboxMessage{
		Shard:         shard,
		Kind:          kind,
		Payload:       []byte(`{"kind":"` + kind + `"}`),
		NextAttemptAt: next,
		CreatedAt:     Epoch().Add(-time.Hour),
	}
}

func cloneMsg(m *store.OutboxMessage) *store.OutboxMessage {
	c := *m
	c.Payload = slices.Clone(m.Payload)
	return &c
}

func insertMsgs(t *testing.T, q store.Querier, msgs ...*store.OutboxMessage) {
	t.Helper()
	if err := q.OutboxInsert(t.Context(), msgs); err != nil {
		t.Fatalf("OutboxInsert(%d messages): %v", len(msgs), err)
	}
}

func outboxClaim(t *testing.T, q store.Querier, p store.OutboxClaimParams) []*store.OutboxMessage {
	t.Helper()
	got, err := q.OutboxClaim(t.Context(), &p)
	if err != nil {
		t.Fatalf("OutboxClaim(%+v): %v", p, err)
	}
	return got
}

func outboxStats(t *testing.T, q store.Querier) store.OutboxStats {
	t.Helper()
	st, err := q.OutboxGetStats(t.Context())
	if err != nil {
		t.Fatalf("OutboxGetStats: %v", err)
	}
	return st
}

// msgIDs returns the IDs of msgs, sorted.
func msgIDs(msgs []*store.OutboxMessage) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	slices.Sort(out)
	return out
}

func checkMsgIDs(t *testing.T, what string, got []*store.OutboxMessage, want ...int64) {
	t.Helper()
	if ids := msgIDs(got); !slices.Equal(ids, want) {
		t.Errorf("%s: got message IDs %v, want %v", what, ids, want)
	}
}

func checkMsg(t *testing.T, what string, got, want *store.OutboxMessage) {
	t.Helper()
	if d := structDiff(got, want); d != "" {
		t.Errorf("%s: message %d differs: %s", what, want.ID, d)
	}
}

func checkStats(t *testing.T, what string, got, want store.OutboxStats) {
	t.Helper()
	if d := structDiff(&got, &want); d != "" {
		t.Errorf("%s: OutboxStats differs: %s", what, d)
	}
}

// farFuture is a claim time at which every message not given up on is due.
var farFuture = Epoch().Add(1000 * time.Hour)

func exerciseOutbox(t *testing.T, newStore newFunc) {
	t.Run("InsertSetsIncreasingIDs", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		if err := s.OutboxInsert(t.Context(), nil); err != nil {
			t.Fatalf("OutboxInsert(nil): %v", err)
		}
		first := []*store.OutboxMessage{outboxMsg("s1", "a", Epoch()), outboxMsg("s2", "b", Epoch()), outboxMsg("s1", "c", time.Time{})}
		insertMsgs(t, s, first...)
		for i, m := range first {
			if m.ID <= 0 || i > 0 && m.ID <= first[i-1].ID {
				t.Fatalf("OutboxInsert set IDs %v, want positive and increasing", []int64{first[0].ID, first[1].ID, first[2].ID})
			}
		}
		// Pinned: an ID is never reused, even once its message is deleted.
		last := first[2].ID
		if err := s.OutboxDelete(t.Context(), last); err != nil {
			t.Fatalf("OutboxDelete(%d): %v", last, err)
		}
		second := []*store.OutboxMessage{outboxMsg("s3", "d", Epoch()), outboxMsg("s3", "e", Epoch())}
		insertMsgs(t, s, second...)
		if second[0].ID <= last || second[1].ID <= second[0].ID {
			t.Fatalf("a later OutboxInsert set IDs %d, %d; want increasing after %d", second[0].ID, second[1].ID, last)
		}
		got := outboxClaim(t, s, store.OutboxClaimParams{Now: farFuture, Until: farFuture.Add(time.Minute), Limit: 100})
		checkMsgIDs(t, "claim of every due message", got, first[0].ID, first[1].ID, second[0].ID, second[1].ID)
		for _, m := range got {
			if want := map[int64]string{first[0].ID: "a", first[1].ID: "b", second[0].ID: "d", second[1].ID: "e"}[m.ID]; m.Kind != want {
				t.Errorf("message %d came back of kind %q, want %q", m.ID, m.Kind, want)
			}
		}
	})

	t.Run("InsertAllOrNone", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		err := s.InTx(ctx, func(q store.Querier) error {
			msgs := []*store.OutboxMessage{outboxMsg("s1", "a", Epoch()), outboxMsg("s1", "b", time.Time{})}
			if err := q.OutboxInsert(ctx, msgs); err != nil {
				return err
			}
			// The transaction sees its own messages.
			if st, err := q.OutboxGetStats(ctx); err != nil || st.Pending != 1 || st.Dead != 1 {
				t.Errorf("OutboxGetStats inside the transaction = %+v, %v; want 1 pending, 1 dead", st, err)
			}
			return fmt.Errorf("give up: %w", errBoom)
		})
		checkErr(t, "InTx returning an error", err, errBoom)
		checkStats(t, "after a rolled-back insert", outboxStats(t, s), store.OutboxStats{})
		if got := outboxClaim(t, s, store.OutboxClaimParams{Now: farFuture, Until: farFuture.Add(time.Minute), Limit: 100}); len(got) != 0 {
			t.Fatalf("a rolled-back insert left messages %v", msgIDs(got))
		}
		// Pinned: a nil Payload is refused (an empty one is not), and the
		// whole batch with it.
		batch := []*store.OutboxMessage{outboxMsg("s1", "d", Epoch()), outboxMsg("s1", "e", Epoch())}
		batch[1].Payload = nil
		if err := s.OutboxInsert(ctx, batch); err == nil {
			t.Fatal("OutboxInsert of a message with a nil Payload succeeded")
		}
		checkStats(t, "after a refused insert", outboxStats(t, s), store.OutboxStats{})
		empty := outboxMsg("s1", "f", time.Time{})
		empty.Payload = []byte{}
		insertMsgs(t, s, empty)
		checkStats(t, "after inserting an empty Payload", outboxStats(t, s), store.OutboxStats{Dead: 1})
		if err := s.OutboxDelete(ctx, empty.ID); err != nil {
			t.Fatalf("OutboxDelete: %v", err)
		}
		// A committed insert stays.
		m := outboxMsg("s1", "c", Epoch())
		err = s.InTx(ctx, func(q store.Querier) error { return q.OutboxInsert(ctx, []*store.OutboxMessage{m}) })
		if err != nil {
			t.Fatalf("InTx: %v", err)
		}
		got := outboxClaim(t, s, store.OutboxClaimParams{Now: Epoch(), Until: Epoch().Add(time.Minute), Limit: 100})
		checkMsgIDs(t, "claim after a committed insert", got, m.ID)
	})

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		zone := time.FixedZone("UTC+5:30", 5*3600+1800)
		full := &store.OutboxMessage{
			Shard:         "shard-7",
			Kind:          "upstream.done",
			Payload:       []byte("{\"task\":\"1:x\"}\x00\xfe\xff"),
			Attempts:      4,
			NextAttemptAt: Epoch().Add(-time.Second).In(zone),
			LastError:     "shard-7: connection refused",
			CreatedAt:     Epoch().Add(-time.Hour - 7*time.Microsecond).In(zone),
		}
		bare := &store.OutboxMessage{Shard: "s", Kind: "k", Payload: []byte("x"), NextAttemptAt: Epoch(), CreatedAt: Epoch()}
		want := []*store.OutboxMessage{cloneMsg(full), cloneMsg(bare)}
		insertMsgs(t, s, full, bare)
		want[0].ID, want[1].ID = full.ID, bare.ID
		until := Epoch().Add(30 * time.Second)
		got := outboxClaim(t, s, store.OutboxClaimParams{Now: Epoch(), Until: until, Limit: 10})
		checkMsgIDs(t, "claim", got, full.ID, bare.ID)
		if len(got) != 2 {
			t.FailNow()
		}
		// Returned as written: NextAttemptAt is Until, the rest as inserted.
		want[0].NextAttemptAt, want[1].NextAttemptAt = until, until
		byID := map[int64]*store.OutboxMessage{got[0].ID: got[0], got[1].ID: got[1]}
		for _, w := range want {
			checkMsg(t, "claimed", byID[w.ID], w)
		}
		// And stored as written: a claim at Until returns the same.
		again := outboxClaim(t, s, store.OutboxClaimParams{Now: until, Until: until.Add(time.Minute), Limit: 10})
		checkMsgIDs(t, "claim at Until", again, full.ID, bare.ID)
		for _, m := range again {
			w := want[0]
			if m.ID == bare.ID {
				w = want[1]
			}
			w = cloneMsg(w)
			w.NextAttemptAt = until.Add(time.Minute)
			checkMsg(t, "claimed again", m, w)
		}
	})

	t.Run("Claim", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		now := Epoch()
		// IDs in insertion order; due times deliberately not in ID order.
		msgs := []*store.OutboxMessage{
			outboxMsg("s", "m0", now.Add(-time.Second)),
			outboxMsg("s", "m1", now),                          // due exactly now
			outboxMsg("s", "m2", now.Add(time.Microsecond)),    // not yet due
			outboxMsg("s", "m3", time.Time{}),                  // given up on
			outboxMsg("s", "m4", now.Add(-2*time.Hour)),        // due the longest
			outboxMsg("s", "m5", now.Add(-time.Minute)),        // due
			outboxMsg("s", "m6", now.Add(time.Hour)),           // due much later
			outboxMsg("s", "m7", time.Time{}),                  // given up on
			outboxMsg("s", "m8", now.Add(-time.Microsecond)),   // due
			outboxMsg("s", "m9", now.Add(-3*time.Microsecond)), // due
		}
		insertMsgs(t, s, msgs...)
		id := func(i int) int64 { return msgs[i].ID }
		until := now.Add(time.Minute)
		// Lowest ID first, at most Limit, whatever the due times.
		got := outboxClaim(t, s, store.OutboxClaimParams{Now: now, Until: until, Limit: 3})
		checkMsgIDs(t, "first claim of 3", got, id(0), id(1), id(4))
		for _, m := range got {
			if !m.NextAttemptAt.Equal(until) {
				t.Errorf("claimed message %d came back due at %s, want Until %s", m.ID, fmtTime(m.NextAttemptAt), fmtTime(until))
			}
		}
		got = outboxClaim(t, s, store.OutboxClaimParams{Now: now, Until: until, Limit: 100})
		checkMsgIDs(t, "second claim", got, id(5), id(8), id(9))
		// Claimed messages are not due again before Until.
		got = outboxClaim(t, s, store.OutboxClaimParams{Now: now, Until: until, Limit: 100})
		checkMsgIDs(t, "third claim at the same time", got)
		got = outboxClaim(t, s, store.OutboxClaimParams{Now: until.Add(-time.Microsecond), Until: until, Limit: 100})
		checkMsgIDs(t, "claim just before Until", got, id(2))
		// At Until they are due again (and m2, claimed until then too).
		later := until.Add(time.Minute)
		got = outboxClaim(t, s, store.OutboxClaimParams{Now: until, Until: later, Limit: 100})
		checkMsgIDs(t, "claim at Until", got, id(0), id(1), id(2), id(4), id(5), id(8), id(9))
		// Given-up-on messages are never claimed, however late.
		got = outboxClaim(t, s, store.OutboxClaimParams{Now: farFuture, Until: farFuture.Add(time.Minute), Limit: 100})
		checkMsgIDs(t, "claim in the far future", got, id(0), id(1), id(2), id(4), id(5), id(6), id(8), id(9))
		checkStats(t, "after the claims", outboxStats(t, s), store.OutboxStats{Pending: 8, Dead: 2, Oldest: Epoch().Add(-time.Hour)})
	})

	t.Run("ClaimInTx", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		m := outboxMsg("s", "k", Epoch())
		insertMsgs(t, s, m)
		p := store.OutboxClaimParams{Now: Epoch(), Until: Epoch().Add(time.Minute), Limit: 10}
		err := s.InTx(ctx, func(q store.Querier) error {
			got, err := q.OutboxClaim(ctx, &p)
			if err != nil {
				return err
			}
			checkMsgIDs(t, "claim inside a transaction", got, m.ID)
			return errBoom
		})
		checkErr(t, "InTx returning an error", err, errBoom)
		// The rolled-back claim left the message due.
		checkMsgIDs(t, "claim after a rolled-back claim", outboxClaim(t, s, p), m.ID)
	})

	t.Run("Update", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		a, b := outboxMsg("s1", "a", Epoch()), outboxMsg("s2", "b", Epoch())
		insertMsgs(t, s, a, b)
		// A retry later: Attempts, NextAttemptAt and LastError change; the
		// other fields of the struct passed in are not written.
		retry := &store.OutboxMessage{ID: a.ID, Shard: "other", Kind: "other", Payload: []byte("other"),
			Attempts: 3, NextAttemptAt: Epoch().Add(10 * time.Second), LastError: "timeout", CreatedAt: Epoch()}
		if err := s.OutboxUpdate(ctx, retry); err != nil {
			t.Fatalf("OutboxUpdate: %v", err)
		}
		// b is given up on.
		dead := cloneMsg(b)
		dead.Attempts, dead.NextAttemptAt, dead.LastError = 7, time.Time{}, "shard s2 refused: unknown task"
		if err := s.OutboxUpdate(ctx, dead); err != nil {
			t.Fatalf("OutboxUpdate to give up: %v", err)
		}
		p := store.OutboxClaimParams{Now: Epoch(), Until: Epoch().Add(time.Hour), Limit: 10}
		checkMsgIDs(t, "claim before the retry is due", outboxClaim(t, s, p))
		p.Now = Epoch().Add(10 * time.Second)
		got := outboxClaim(t, s, p)
		checkMsgIDs(t, "claim when the retry is due", got, a.ID)
		if len(got) == 1 {
			want := cloneMsg(a)
			want.Attempts, want.NextAttemptAt, want.LastError = 3, p.Until, "timeout"
			checkMsg(t, "updated message", got[0], want)
		}
		checkStats(t, "after the updates", outboxStats(t, s), store.OutboxStats{Pending: 1, Dead: 1, Oldest: a.CreatedAt})
		got = outboxClaim(t, s, store.OutboxClaimParams{Now: farFuture, Until: farFuture.Add(time.Minute), Limit: 10})
		checkMsgIDs(t, "claim in the far future", got, a.ID)

		// Revived, a message given up on is due again.
		dead.NextAttemptAt, dead.LastError = Epoch(), ""
		if err := s.OutboxUpdate(ctx, dead); err != nil {
			t.Fatalf("OutboxUpdate to revive: %v", err)
		}
		got = outboxClaim(t, s, store.OutboxClaimParams{Now: Epoch(), Until: Epoch().Add(time.Minute), Limit: 10})
		checkMsgIDs(t, "claim after reviving", got, b.ID)
		if len(got) == 1 && (got[0].Attempts != 7 || got[0].LastError != "") {
			t.Errorf("revived message has Attempts %d, LastError %q; want 7, empty", got[0].Attempts, got[0].LastError)
		}

		missing := cloneMsg(a)
		missing.ID = b.ID + 1000
		checkErr(t, "OutboxUpdate of a missing message", s.OutboxUpdate(ctx, missing), store.ErrNotFound)
		if err := s.OutboxDelete(ctx, a.ID); err != nil {
			t.Fatalf("OutboxDelete: %v", err)
		}
		checkErr(t, "OutboxUpdate of a deleted message", s.OutboxUpdate(ctx, retry), store.ErrNotFound)
		err := s.InTx(ctx, func(q store.Querier) error { return q.OutboxUpdate(ctx, missing) })
		checkErr(t, "OutboxUpdate of a missing message in a transaction", err, store.ErrNotFound)
	})

	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		a, b, c := outboxMsg("s", "a", Epoch()), outboxMsg("s", "b", Epoch()), outboxMsg("s", "c", time.Time{})
		insertMsgs(t, s, a, b, c)
		for _, id := range []int64{a.ID, c.ID} {
			if err := s.OutboxDelete(ctx, id); err != nil {
				t.Fatalf("OutboxDelete(%d): %v", id, err)
			}
		}
		got := outboxClaim(t, s, store.OutboxClaimParams{Now: farFuture, Until: farFuture.Add(time.Minute), Limit: 10})
		checkMsgIDs(t, "claim after deleting", got, b.ID)
		checkStats(t, "after deleting", outboxStats(t, s), store.OutboxStats{Pending: 1, Oldest: b.CreatedAt})
		// Deleting a missing message, or one already deleted, is no error.
		for _, id := range []int64{a.ID, c.ID + 1000} {
			if err := s.OutboxDelete(ctx, id); err != nil {
				t.Errorf("OutboxDelete(%d) of a missing message: %v", id, err)
			}
		}
		if err := s.InTx(ctx, func(q store.Querier) error { return q.OutboxDelete(ctx, a.ID) }); err != nil {
			t.Errorf("OutboxDelete of a missing message in a transaction: %v", err)
		}
		checkStats(t, "after deleting missing messages", outboxStats(t, s), store.OutboxStats{Pending: 1, Oldest: b.CreatedAt})
	})

	t.Run("Stats", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		checkStats(t, "empty outbox", outboxStats(t, s), store.OutboxStats{})
		newer := outboxMsg("s", "newer", Epoch())
		newer.CreatedAt = Epoch().Add(-time.Minute)
		older := outboxMsg("s", "older", Epoch().Add(time.Hour)) // pending, though not due yet
		older.CreatedAt = Epoch().Add(-2 * time.Hour)
		oldest := outboxMsg("s", "dead", time.Time{}) // given up on: not the oldest pending
		oldest.CreatedAt = Epoch().Add(-3 * time.Hour)
		insertMsgs(t, s, newer, older, oldest)
		checkStats(t, "three messages", outboxStats(t, s), store.OutboxStats{Pending: 2, Dead: 1, Oldest: older.CreatedAt})
		older.NextAttemptAt = time.Time{}
		if err := s.OutboxUpdate(ctx, older); err != nil {
			t.Fatalf("OutboxUpdate: %v", err)
		}
		checkStats(t, "after giving up on the older", outboxStats(t, s), store.OutboxStats{Pending: 1, Dead: 2, Oldest: newer.CreatedAt})
		if err := s.OutboxDelete(ctx, newer.ID); err != nil {
			t.Fatalf("OutboxDelete: %v", err)
		}
		checkStats(t, "with only dead messages", outboxStats(t, s), store.OutboxStats{Dead: 2})
	})

	t.Run("ConcurrentClaim", func(t *testing.T) {
		t.Parallel()
		exerciseConcurrentOutboxClaim(t, newStore)
	})

	t.Run("TaskArgListRefs", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		tree := func(id, jobID string) *domain.Task {
			return &domain.Task{ID: id, JobID: jobID, Kind: domain.KindTree, Workload: "w", State: domain.TaskWaiting,
				PendingUpstreams: 1, CreatedAt: Epoch(), UpdatedAt: Epoch()}
		}
		insertTasks(t, s, tree("0:j1.b", "j1"), tree("0:j1.a", "j1"), tree("0:j1.c", "j1"), tree("0:j2.a", "j2"))
		// Inserted out of order.
		args := []domain.TaskArg{
			{TaskID: "0:j1.b", Position: 2, UpstreamID: "1:y"},
			{TaskID: "0:j1.b", Position: 1, Value: []byte(`42`)},
			{TaskID: "0:j1.b", Position: 0, UpstreamID: "1:x"},
			{TaskID: "0:j1.b", Position: 3, UpstreamID: "1:z"},
			{TaskID: "0:j1.a", Position: 1, UpstreamID: "1:x"},
			{TaskID: "0:j1.a", Position: 0, UpstreamID: "1:w"},
			{TaskID: "0:j1.c", Position: 0, Value: []byte(`"given"`)},
			{TaskID: "0:j1.c", Position: 1},                       // no value, but no upstream either
			{TaskID: "0:j2.a", Position: 0, UpstreamID: "1:x"},    // another job's
			{TaskID: "0:j1.none", Position: 0, UpstreamID: "1:x"}, // of no task
		}
		if err := s.TaskArgInsert(ctx, args); err != nil {
			t.Fatalf("TaskArgInsert: %v", err)
		}
		if ok, err := s.TaskArgResolve(ctx, &store.TaskArgResolveParams{TaskID: "0:j1.b", UpstreamID: "1:z", Value: []byte(`"z"`)}); err != nil || !ok {
			t.Fatalf("TaskArgResolve = %v, %v; want true", ok, err)
		}
		list := func(jobID string, open bool) []domain.TaskArg {
			t.Helper()
			got, err := s.TaskArgListRefs(ctx, &store.TaskArgListRefsParams{JobID: jobID, Open: open})
			if err != nil {
				t.Fatalf("TaskArgListRefs(%s, open %v): %v", jobID, open, err)
			}
			return got
		}
		listOpen := func(jobID string) []domain.TaskArg { t.Helper(); return list(jobID, true) }
		check := func(what string, got, want []domain.TaskArg) {
			t.Helper()
			if len(got) != len(want) {
				t.Fatalf("%s: got %+v, want %+v", what, got, want)
			}
			for i := range want {
				g, w := got[i], want[i]
				if g.TaskID != w.TaskID || g.Position != w.Position || g.UpstreamID != w.UpstreamID || g.Value != nil {
					t.Fatalf("%s: got %+v, want %+v", what, got, want)
				}
			}
		}
		check("open arguments of j1", listOpen("j1"), []domain.TaskArg{
			{TaskID: "0:j1.a", Position: 0, UpstreamID: "1:w"},
			{TaskID: "0:j1.a", Position: 1, UpstreamID: "1:x"},
			{TaskID: "0:j1.b", Position: 0, UpstreamID: "1:x"},
			{TaskID: "0:j1.b", Position: 2, UpstreamID: "1:y"},
		})
		check("open arguments of j2", listOpen("j2"), []domain.TaskArg{{TaskID: "0:j2.a", Position: 0, UpstreamID: "1:x"}})
		check("open arguments of a job of no tasks", listOpen("j3"), nil)
		all := []domain.TaskArg{ // the resolved one too, never a given value
			{TaskID: "0:j1.a", Position: 0, UpstreamID: "1:w"},
			{TaskID: "0:j1.a", Position: 1, UpstreamID: "1:x"},
			{TaskID: "0:j1.b", Position: 0, UpstreamID: "1:x"},
			{TaskID: "0:j1.b", Position: 2, UpstreamID: "1:y"},
			{TaskID: "0:j1.b", Position: 3, UpstreamID: "1:z"},
		}
		check("upstream arguments of j1", list("j1", false), all)

		if ok, err := s.TaskArgResolve(ctx, &store.TaskArgResolveParams{TaskID: "0:j1.a", UpstreamID: "1:x", Value: []byte(`"x"`)}); err != nil || !ok {
			t.Fatalf("TaskArgResolve = %v, %v; want true", ok, err)
		}
		check("open arguments of j1 after resolving one", listOpen("j1"), []domain.TaskArg{
			{TaskID: "0:j1.a", Position: 0, UpstreamID: "1:w"},
			{TaskID: "0:j1.b", Position: 0, UpstreamID: "1:x"},
			{TaskID: "0:j1.b", Position: 2, UpstreamID: "1:y"},
		})
		// Inside a transaction too.
		err := s.InTx(ctx, func(q store.Querier) error {
			if _, err := q.TaskArgResolve(ctx, &store.TaskArgResolveParams{TaskID: "0:j1.b", UpstreamID: "1:y", Value: []byte(`"y"`)}); err != nil {
				return err
			}
			got, err := q.TaskArgListRefs(ctx, &store.TaskArgListRefsParams{JobID: "j1", Open: true})
			if err != nil {
				return err
			}
			check("open arguments of j1 in a transaction", got, []domain.TaskArg{
				{TaskID: "0:j1.a", Position: 0, UpstreamID: "1:w"},
				{TaskID: "0:j1.b", Position: 0, UpstreamID: "1:x"},
			})
			return nil
		})
		if err != nil {
			t.Fatalf("InTx: %v", err)
		}
		check("upstream arguments of j1 with more of them resolved", list("j1", false), all)
	})
}

// exerciseConcurrentOutboxClaim has 8 claimers drain 60 due messages and
// checks that every message was handed out exactly once.
func exerciseConcurrentOutboxClaim(t *testing.T, newStore newFunc) {
	const (
		messages = 60
		claimers = 8
	)
	s := newStore(t)
	var msgs []*store.OutboxMessage
	for i := range messages {
		msgs = append(msgs, outboxMsg(fmt.Sprintf("s%d", i%4), fmt.Sprintf("m%d", i), Epoch().Add(-time.Duration(i)*time.Second)))
	}
	insertMsgs(t, s, msgs...)
	now, until := Epoch(), Epoch().Add(time.Minute)
	owner := claimConcurrently(t, claimers, 2*messages, func(int) ([]*store.OutboxMessage, error) {
		got, err := s.OutboxClaim(t.Context(), &store.OutboxClaimParams{Now: now, Until: until, Limit: 3})
		if len(got) > 3 {
			return nil, fmt.Errorf("a claim got %d messages with Limit 3", len(got))
		}
		return got, err
	}, func(m *store.OutboxMessage) int64 { return m.ID }, func(_ int, m *store.OutboxMessage) error {
		if !m.NextAttemptAt.Equal(until) {
			return fmt.Errorf("message %d came back due at %s, want %s", m.ID, fmtTime(m.NextAttemptAt), fmtTime(until))
		}
		return nil
	})
	for _, m := range msgs {
		if _, ok := owner[m.ID]; !ok {
			t.Errorf("message %d was never claimed", m.ID)
		}
	}
	if len(owner) != messages {
		t.Fatalf("claimers took %d messages, want %d", len(owner), messages)
	}
	if got := outboxClaim(t, s, store.OutboxClaimParams{Now: now, Until: until, Limit: 100}); len(got) != 0 {
		t.Errorf("after the claims, messages %v are still due", msgIDs(got))
	}
}
