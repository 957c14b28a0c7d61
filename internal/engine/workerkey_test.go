package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/store"
)

// TestWorkerKeys: a key is made for the caller's account, kept only as
// its hash, untrusted, and authenticates its worker as the key's
// principal; a name is taken once per account; a non-admin lists its own
// keys and an admin everyone's; only an admin trusts a key, and to anyone
// else another account's key does not exist; a revoked key is refused at
// once; each change is in the audit trail.
func TestWorkerKeys(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		e := newEngine(s, engine.Config{})
		for _, name := range []string{"ada", "bob"} {
			if _, _, err := e.CreateAccount(ctx, domain.Account{Name: name}); err != nil {
				t.Fatal(err)
			}
		}
		k, key, err := e.CreateWorkerKey(as(ctx, "ada"), "laptop")
		if err != nil {
			t.Fatal(err)
		}
		if k.Account != "ada" || k.Trusted || !strings.HasPrefix(key, domain.WorkerKeyPrefix) || !domain.LooksLikeWorkerKey(key) {
			t.Fatalf("created %+v with key %q; want ada's untrusted key, prefixed", k, key)
		}
		if _, err := s.WorkerKeyGet(ctx, key); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the key itself is a key of the store: %v", err)
		}
		if p, err := e.AuthenticateWorker(ctx, key); err != nil || p != (domain.Principal{Account: "ada", Key: "laptop"}) {
			t.Errorf("AuthenticateWorker(ada's key) = %+v, %v", p, err)
		}
		if _, _, err := e.CreateWorkerKey(as(ctx, "ada"), "laptop"); !errors.Is(err, domain.ErrConflict) {
			t.Errorf("a second ada/laptop: %v, want ErrConflict", err)
		}
		if _, _, err := e.CreateWorkerKey(as(ctx, "bob"), "laptop"); err != nil {
			t.Errorf("bob/laptop beside ada/laptop: %v", err)
		}
		if _, _, err := e.CreateWorkerKey(as(ctx, "ada"), "Bad/Name"); !errors.Is(err, domain.ErrInvalidArgument) {
			t.Errorf("a key named Bad/Name: %v, want ErrInvalidArgument", err)
		}
		if l, err := e.ListWorkerKeys(as(ctx, "ada")); err != nil || len(l) != 1 || l[0].Account != "ada" {
			t.Errorf("ada's keys: %v, %v; want hers alone", l, err)
		}
		if l, err := e.ListWorkerKeys(ctx); err != nil || len(l) != 2 {
			t.Errorf("the admin's list: %v, %v; want both keys", l, err)
		}

		if _, err := e.TrustWorkerKey(as(ctx, "bob"), "ada", "laptop", true); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("bob trusts ada's key: %v, want ErrNotFound", err)
		}
		if _, err := e.TrustWorkerKey(as(ctx, "ada"), "ada", "laptop", true); !errors.Is(err, domain.ErrPermissionDenied) {
			t.Errorf("ada trusts her own key: %v, want ErrPermissionDenied", err)
		}
		if _, err := e.RevokeWorkerKey(as(ctx, "bob"), "nope"); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("bob revokes a key he has not: %v, want ErrNotFound", err)
		}
		if got, err := e.TrustWorkerKey(ctx, "ada", "laptop", true); err != nil || !got.Trusted {
			t.Fatalf("the admin trusts ada/laptop: %+v, %v", got, err)
		}
		if p, err := e.AuthenticateWorker(ctx, key); err != nil || !p.Trusted {
			t.Errorf("ada's key once trusted: %+v, %v; want trusted at once", p, err)
		}
		if _, err := e.TrustWorkerKey(ctx, "ada", "nope", true); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("the admin trusts a key that is not there: %v, want ErrNotFound", err)
		}
		if _, err := e.RevokeWorkerKey(as(ctx, "ada"), "laptop"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.AuthenticateWorker(ctx, key); !errors.Is(err, domain.ErrUnauthenticated) {
			t.Errorf("ada's key once revoked: %v, want ErrUnauthenticated", err)
		}
		entries, _, err := e.ListAudit(ctx, engine.ListAuditParams{})
		if err != nil {
			t.Fatal(err)
		}
		var actions []string
		for _, a := range entries {
			if strings.HasPrefix(a.Action, "worker_key.") {
				actions = append(actions, a.Account+" "+a.Action+" "+a.Target)
			}
		}
		want := []string{"ada worker_key.revoke ada/laptop", "admin worker_key.trust ada/laptop", "bob worker_key.add bob/laptop", "ada worker_key.add ada/laptop"}
		if strings.Join(actions, "\n") != strings.Join(want, "\n") {
			t.Errorf("audit trail:\n%s\nwant\n%s", strings.Join(actions, "\n"), strings.Join(want, "\n"))
		}
	})
}

// asWorker is ctx of a worker request of principal p.
func asWorker(ctx context.Context, p domain.Principal) context.Context {
	return domain.WithPrincipal(ctx, p)
}

// TestWorkerKeyClaims: an untrusted key's claim gets nothing, after the
// wait it asked for; a trusted key claims as the pool does, its lease held
// as its own and its attempts charged to its account; revoking the key
// gives its leases back at once without holding the attempt against the
// task, so that a task of one attempt runs again.
func TestWorkerKeyClaims(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		e := newEngine(s, engine.Config{})
		sp := spec(2)
		sp.MaxAttempts = 1
		if _, _, err := e.CreateJob(as(ctx, "bob"), sp, ""); err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.CreateWorkerKey(as(ctx, "ada"), "laptop"); err != nil {
			t.Fatal(err)
		}
		laptop := domain.Principal{Account: "ada", Key: "laptop"}
		start := time.Now()
		got, err := e.ClaimTasks(asWorker(ctx, laptop), engine.ClaimTasksParams{WorkerID: "w1", Max: 2, Wait: 300 * time.Millisecond})
		if err != nil || len(got) != 0 || time.Since(start) < 300*time.Millisecond {
			t.Fatalf("an untrusted key's claim: %d tasks, %v, after %v; want none, after the wait", len(got), err, time.Since(start))
		}

		laptop.Trusted = true
		got, err = e.ClaimTasks(asWorker(ctx, laptop), engine.ClaimTasksParams{WorkerID: "w1", Max: 1})
		if err != nil || len(got) != 1 || got[0].LeaseOwner != "ada/laptop@w1" {
			t.Fatalf("a trusted key's claim: %v, %v; want one task leased to ada/laptop@w1", got, err)
		}
		done := got[0]
		if _, err := e.CompleteTask(ctx, engine.CompleteTaskParams{TaskID: done.ID, WorkerID: "w1", Attempt: 1, Output: output(done.ID)}); !errors.Is(err, domain.ErrLeaseLost) {
			t.Errorf("a pool worker of the same ID completes the key's lease: %v, want ErrLeaseLost", err)
		}
		if _, err := e.CompleteTask(asWorker(ctx, laptop), engine.CompleteTaskParams{TaskID: done.ID, WorkerID: "w1", Attempt: 1, Output: output(done.ID)}); err != nil {
			t.Fatal(err)
		}
		got, err = e.ClaimTasks(asWorker(ctx, laptop), engine.ClaimTasksParams{WorkerID: "w2", Max: 1})
		if err != nil || len(got) != 1 {
			t.Fatalf("a second claim: %v, %v", got, err)
		}
		held := got[0]
		if _, err := e.RenewLease(asWorker(ctx, laptop), held.ID, "w2", 1); err != nil {
			t.Fatalf("the key's heartbeat: %v", err)
		}
		// The input of a task is the key's to read while it holds it alone.
		for who, c := range map[string]context.Context{"the key holding it": asWorker(ctx, laptop), "the pool": ctx} {
			if _, err := e.StatTaskInput(c, held.ID); err == nil || !strings.Contains(err.Error(), "hosted at") {
				t.Errorf("%s reads the input of %s: %v; want it told the input is hosted", who, held.ID, err)
			}
		}
		other := domain.Principal{Account: "bob", Key: "desk", Trusted: true}
		for id, c := range map[string]context.Context{held.ID: asWorker(ctx, other), done.ID: asWorker(ctx, laptop)} {
			if _, err := e.StatTaskInput(c, id); !errors.Is(err, domain.ErrNotFound) || !strings.Contains(err.Error(), "does not exist") {
				t.Errorf("a key not holding %s reads its input: %v; want it not to exist", id, err)
			}
		}
		if n, err := e.RevokeWorkerKey(as(ctx, "ada"), "laptop"); err != nil || n != 1 {
			t.Fatalf("revoke ada/laptop: %d leases given back, %v; want 1", n, err)
		}
		v, err := e.GetTask(ctx, held.ID)
		if err != nil || v.State != domain.TaskPending || v.MaxAttempts != 2 {
			t.Fatalf("the revoked key's task: %+v, %v; want pending with another attempt", v.Task, err)
		}
		got, err = e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "pool", Max: 1})
		if err != nil || len(got) != 1 || got[0].ID != held.ID || got[0].Attempt != 2 {
			t.Fatalf("the pool claims it again: %v, %v", got, err)
		}
		if _, err := e.CompleteTask(ctx, engine.CompleteTaskParams{TaskID: held.ID, WorkerID: "pool", Attempt: 2, Output: output(held.ID)}); err != nil {
			t.Fatal(err)
		}
		usage, err := e.ListUsage(ctx, engine.ListUsageParams{By: []engine.UsageField{engine.UsageWorkerAccount}})
		if err != nil {
			t.Fatal(err)
		}
		tasks := map[string]int64{}
		for _, u := range usage {
			tasks[u.WorkerAccount] = u.Tasks
		}
		if tasks["ada"] != 2 || tasks[""] != 1 {
			t.Errorf("attempts by worker account: %v; want ada's key 2 (a result and a revoked lease), the pool 1", tasks)
		}
	})
}
