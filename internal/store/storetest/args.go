package storetest

import (
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

func exerciseTaskArgs(t *testing.T, newStore newFunc) {
	t.Run("InsertListResolve", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		args := []domain.TaskArg{
			{TaskID: "0:root", Position: 1, UpstreamID: "1:leaf"},
			{TaskID: "0:root", Position: 0, Value: []byte(`{"x": [1, 2]}`)},
			{TaskID: "0:other", Position: 0, UpstreamID: "1:leaf"},
		}
		if err := s.TaskArgInsert(ctx, args); err != nil {
			t.Fatal(err)
		}
		got, err := s.TaskArgList(ctx, "0:root")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Position != 0 || string(got[0].Value) != `{"x": [1, 2]}` || got[0].UpstreamID != "" ||
			got[1].Position != 1 || got[1].Value != nil || got[1].UpstreamID != "1:leaf" {
			t.Fatalf("TaskArgList = %+v", got)
		}
		ok, err := s.TaskArgResolve(ctx, &store.TaskArgResolveParams{TaskID: "0:root", UpstreamID: "1:leaf", Value: []byte(`"done"`)})
		if err != nil || !ok {
			t.Fatalf("TaskArgResolve = %v, %v; want true", ok, err)
		}
		// A replay changes nothing, even with another value.
		ok, err = s.TaskArgResolve(ctx, &store.TaskArgResolveParams{TaskID: "0:root", UpstreamID: "1:leaf", Value: []byte(`"again"`)})
		if err != nil || ok {
			t.Fatalf("replayed TaskArgResolve = %v, %v; want false", ok, err)
		}
		// No argument awaits that upstream, or no such task: nothing to set.
		for _, p := range []store.TaskArgResolveParams{
			{TaskID: "0:root", UpstreamID: "1:stranger", Value: []byte(`"x"`)},
			{TaskID: "0:none", UpstreamID: "1:leaf", Value: []byte(`"x"`)},
		} {
			if ok, err := s.TaskArgResolve(ctx, &p); err != nil || ok {
				t.Fatalf("TaskArgResolve(%s from %s) = %v, %v; want false, nil", p.TaskID, p.UpstreamID, ok, err)
			}
		}
		got, _ = s.TaskArgList(ctx, "0:root")
		if string(got[1].Value) != `"done"` {
			t.Fatalf("resolved argument = %q, want the first value", got[1].Value)
		}
		other, _ := s.TaskArgList(ctx, "0:other")
		if len(other) != 1 || other[0].Value != nil {
			t.Fatalf("resolving one task's argument touched another's: %+v", other)
		}
		if none, err := s.TaskArgList(ctx, "0:none"); err != nil || len(none) != 0 {
			t.Fatalf("arguments of a task with none: %v, %v", none, err)
		}
	})
	t.Run("AllOrNone", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		err := s.TaskArgInsert(ctx, []domain.TaskArg{
			{TaskID: "0:t", Position: 0, Value: []byte("1")},
			{TaskID: "0:t", Position: 0, Value: []byte("2")}, // taken
		})
		checkErr(t, "TaskArgInsert of a taken position", err, store.ErrDuplicate)
		if got, _ := s.TaskArgList(ctx, "0:t"); len(got) != 0 {
			t.Fatalf("a refused insert left %d arguments", len(got))
		}
		// Inside a transaction, a refused insert leaves the transaction usable.
		err = s.InTx(ctx, func(q store.Querier) error {
			if err := q.TaskArgInsert(ctx, []domain.TaskArg{{TaskID: "0:u", Position: 0, Value: []byte("1")}, {TaskID: "0:u", Position: 0}}); err == nil {
				t.Error("duplicate insert in a transaction succeeded")
			}
			return q.TaskArgInsert(ctx, []domain.TaskArg{{TaskID: "0:v", Position: 0, Value: []byte("3")}})
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := s.TaskArgList(ctx, "0:v"); len(got) != 1 {
			t.Fatalf("the transaction's later insert is missing: %+v", got)
		}
		if got, _ := s.TaskArgList(ctx, "0:u"); len(got) != 0 {
			t.Fatalf("the refused insert inside the transaction left %d arguments", len(got))
		}
	})
}
