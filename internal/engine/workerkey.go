package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Worker keys (SPEC §10): any account may enrol its own machines with a
// key, made here, shown once to whoever asked for it and kept only as its
// TokenHash, as account tokens are. A key is untrusted until an admin
// trusts it. A worker request carries its principal (domain.Principal):
// the trusted pool of WORKER_AUTH_TOKEN, or a key's account, name and
// trust; its leases are held as the principal's lease owner
// (domain.Principal.LeaseOwner), so that a key's leases are found when it
// is revoked and its attempts are charged to its account.
//
// An untrusted key's workers run only the chunks of jobs that let them
// (claimOpen, in vote.go).

// workerKeyTarget names a key in the audit trail and in errors.
func workerKeyTarget(account, name string) string { return account + "/" + name }

// CreateWorkerKey makes a new worker key name of the caller's account, and
// returns it as recorded and its secret, which is not kept and cannot be
// read again. A name the account has already is ErrConflict.
func (e *Engine) CreateWorkerKey(ctx context.Context, name string) (*domain.WorkerKey, string, error) {
	if !domain.ValidAccountName(name) {
		return nil, "", domain.Invalidf("worker key name %q: use 1 to 63 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit", name)
	}
	k := &domain.WorkerKey{Account: domain.CallerOf(ctx).Account, Name: name, CreatedAt: e.now()}
	secret, hash := newToken(domain.WorkerKeyPrefix)
	err := e.tx(ctx, func(q store.Querier) error {
		if err := q.WorkerKeyInsert(ctx, k, hash); err != nil {
			return err
		}
		return e.audit(ctx, q, actionKeyAdd, workerKeyTarget(k.Account, k.Name), "untrusted")
	})
	if errors.Is(err, store.ErrDuplicate) {
		return nil, "", fmt.Errorf("worker key %q exists already; revoke it first or pick another name: %w", name, domain.ErrConflict)
	}
	if err != nil {
		return nil, "", mapStoreErr(fmt.Errorf("create worker key %s: %w", name, err))
	}
	return k, secret, nil
}

// ListWorkerKeys returns the caller's worker keys, or every account's for
// an admin, by account then name.
func (e *Engine) ListWorkerKeys(ctx context.Context) ([]*domain.WorkerKey, error) {
	c := domain.CallerOf(ctx)
	account := c.Account
	if c.Admin {
		account = ""
	}
	list, err := e.store.WorkerKeyList(ctx, account)
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("list worker keys: %w", err))
	}
	return list, nil
}

// RevokeWorkerKey deletes the caller's worker key name and, in the same
// transaction, gives back the leases its workers hold without holding
// their attempts against their tasks; it returns how many it gave back.
// From then on the key is refused (401). A key that does not exist is
// ErrNotFound.
func (e *Engine) RevokeWorkerKey(ctx context.Context, name string) (int, error) {
	pr := domain.Principal{Account: domain.CallerOf(ctx).Account, Key: name}
	target := workerKeyTarget(pr.Account, name)
	var released []*domain.Task
	err := e.tx(ctx, func(q store.Querier) error {
		if err := q.WorkerKeyDelete(ctx, pr.Account, name); err != nil {
			return notFound(err, "worker key %q", name)
		}
		ids, err := q.TaskListLeasedBy(ctx, pr.LeaseOwnerPrefix())
		if err != nil {
			return err
		}
		held := make(map[string]*domain.Task, len(ids))
		if err := getTasks(ctx, q, ids, held); err != nil {
			return err
		}
		tasks := make([]*domain.Task, 0, len(held))
		for _, t := range held {
			tasks = append(tasks, t)
		}
		if released, err = releaseLeases(ctx, q, tasks, e.now(), func(t *domain.Task) string {
			return fmt.Sprintf("released at once: worker key %s of worker %q was revoked during attempt %d", target, t.LeaseOwner, t.Attempt)
		}); err != nil {
			return err
		}
		return e.audit(ctx, q, actionKeyRevoke, target, fmt.Sprintf("%d leases given back", len(released)))
	})
	if err != nil {
		return 0, mapStoreErr(fmt.Errorf("revoke worker key %s: %w", name, err))
	}
	e.authChanged()
	e.held.refresh(released...) // still leased when a task's other attempt goes on
	e.released(released)
	return len(released), nil
}

// TrustWorkerKey sets whether the worker key name of account is trusted,
// for an admin, and returns the key as it is now. To anyone else another
// account's key is ErrNotFound, exactly as if it did not exist, and its
// own ErrPermissionDenied.
func (e *Engine) TrustWorkerKey(ctx context.Context, account, name string, trusted bool) (*domain.WorkerKey, error) {
	if err := MayTrustWorkerKey(ctx, account, name); err != nil {
		return nil, err
	}
	target := workerKeyTarget(account, name)
	var out *domain.WorkerKey
	err := e.tx(ctx, func(q store.Querier) error {
		if err := q.WorkerKeyTrust(ctx, account, name, trusted); err != nil {
			return notFound(err, "worker key %q", target)
		}
		list, err := q.WorkerKeyList(ctx, account)
		if err != nil {
			return err
		}
		for _, k := range list {
			if k.Name == name {
				out = k
			}
		}
		action := actionKeyUntrust
		if trusted {
			action = actionKeyTrust
		}
		return e.audit(ctx, q, action, target, "")
	})
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("set the trust of worker key %s: %w", target, err))
	}
	e.authChanged()
	return out, nil
}

// MayTrustWorkerKey refuses a caller of ctx that may not set the trust of
// the worker key name of account, as TrustWorkerKey does: a transport may
// ask first, so as to refuse before it reads a request's body.
func MayTrustWorkerKey(ctx context.Context, account, name string) error {
	c := domain.CallerOf(ctx)
	switch {
	case c.Admin:
		return nil
	case c.Account != account:
		return fmt.Errorf("worker key %q does not exist: %w", workerKeyTarget(account, name), domain.ErrNotFound)
	}
	return fmt.Errorf("account %s is not an admin; only an admin may trust a worker key: %w", c.Account, domain.ErrPermissionDenied)
}

// AuthenticateWorker returns the principal whose worker key key is. A key
// that is no key's, or revoked, or of a disabled account, is
// ErrUnauthenticated; the error does not say which.
func (e *Engine) AuthenticateWorker(ctx context.Context, key string) (domain.Principal, error) {
	refused := fmt.Errorf("unknown worker key: check the key you were given: %w", domain.ErrUnauthenticated)
	if !domain.LooksLikeWorkerKey(key) {
		return domain.Principal{}, refused // no key's: not worth a lookup
	}
	hash, now := TokenHash(key), time.Now()
	p, ok, gen := e.keys.get(hash, now)
	if ok {
		return p, nil
	}
	k, err := e.store.WorkerKeyGet(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return domain.Principal{}, refused
	}
	if err != nil {
		return domain.Principal{}, mapStoreErr(fmt.Errorf("look a worker key up: %w", err))
	}
	a, err := e.store.AccountGet(ctx, k.Account)
	if errors.Is(err, store.ErrNotFound) || err == nil && a.Disabled {
		return domain.Principal{}, refused
	}
	if err != nil {
		return domain.Principal{}, mapStoreErr(fmt.Errorf("read account %s: %w", k.Account, err))
	}
	p = domain.Principal{Account: k.Account, Key: k.Name, Trusted: k.Trusted}
	e.keys.put(hash, p, now, gen)
	return p, nil
}
