package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/pgtest"
)

// TestKeyChangesReachEveryReplica: two coordinators share a PostgreSQL
// database, and each remembers the worker keys it looked up. A key
// trusted, then revoked, on one, and an account disabled there, are seen
// on the other within a couple of seconds, far sooner than what it
// remembers would run out by itself.
func TestKeyChangesReachEveryReplica(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a := newEngine(openPG(t, url), engine.Config{NodeID: "a"})
	b := newEngine(openPG(t, url), engine.Config{NodeID: "b"})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { a.Run(ctx) })
	wg.Go(func() { b.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()

	for _, name := range []string{"ada", "bob"} {
		if _, _, err := a.CreateAccount(ctx, domain.Account{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	_, adaKey, err := a.CreateWorkerKey(as(ctx, "ada"), "k")
	if err != nil {
		t.Fatal(err)
	}
	_, bobKey, err := a.CreateWorkerKey(as(ctx, "bob"), "k")
	if err != nil {
		t.Fatal(err)
	}
	// seen waits up to 2 s for b to see what ok tells of the key.
	seen := func(key string, ok func(domain.Principal, error) bool) bool {
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if ok(b.AuthenticateWorker(ctx, key)) {
				return true
			}
		}
		return false
	}
	// Listening starts asynchronously and a notification sent before it
	// is lost, so trust and untrust until b follows.
	trusted := func(want bool) func(domain.Principal, error) bool {
		return func(p domain.Principal, err error) bool { return err == nil && p.Trusted == want }
	}
	for i := 0; ; i++ {
		if p, err := b.AuthenticateWorker(ctx, adaKey); err != nil || p.Trusted {
			t.Fatalf("b: ada's key before it is trusted: %+v, %v", p, err)
		}
		if _, err := a.TrustWorkerKey(ctx, "ada", "k", true); err != nil {
			t.Fatal(err)
		}
		if seen(adaKey, trusted(true)) {
			break
		}
		if i == 5 {
			t.Fatal("b never saw ada's key trusted on a")
		}
		if _, err := a.TrustWorkerKey(ctx, "ada", "k", false); err != nil {
			t.Fatal(err)
		}
		if !seen(adaKey, trusted(false)) {
			t.Fatal("b did not see ada's key untrusted again")
		}
	}
	refused := func(_ domain.Principal, err error) bool { return errors.Is(err, domain.ErrUnauthenticated) }
	if _, err := a.RevokeWorkerKey(as(ctx, "ada"), "k"); err != nil {
		t.Fatal(err)
	}
	if !seen(adaKey, refused) {
		t.Error("b still accepts ada's key 2 s after a revoked it")
	}
	if p, err := b.AuthenticateWorker(ctx, bobKey); err != nil || p.Account != "bob" {
		t.Fatalf("b: bob's key: %+v, %v", p, err)
	}
	disabled := true
	if _, err := a.UpdateAccount(ctx, "bob", engine.AccountChange{Disabled: &disabled}); err != nil {
		t.Fatal(err)
	}
	if !seen(bobKey, refused) {
		t.Error("b still accepts bob's key 2 s after a disabled bob")
	}
}
