package domain

import (
	"context"
	"strings"
	"time"
)

// WorkerKey is a key an account enrols one of its own machines with
// (SPEC §10). Its secret is shown once and kept only as a hash; a key is
// untrusted until an admin trusts it.
type WorkerKey struct {
	Account   string
	Name      string // as account names are: ValidAccountName
	Trusted   bool
	CreatedAt time.Time
}

// WorkerKeyPrefix starts every worker key, so that a key is told from an
// account's token (AccountTokenPrefix) before any lookup.
const WorkerKeyPrefix = "scimeshw_"

// LooksLikeWorkerKey reports whether token has the form of a worker key.
func LooksLikeWorkerKey(token string) bool {
	return strings.HasPrefix(token, WorkerKeyPrefix) && len(token) == len(WorkerKeyPrefix)+64
}

// Principal is who a worker request acts as: the installation's pool
// (WORKER_AUTH_TOKEN, or no worker token on loopback), which is trusted
// and has no account, or a worker key of an account.
type Principal struct {
	Account string // "" for the pool
	Key     string // the key's name; "" for the pool
	Trusted bool
}

// PoolPrincipal is the installation's own trusted pool of workers.
var PoolPrincipal = Principal{Trusted: true}

type principalKey struct{}

// WithPrincipal returns ctx carrying the worker principal p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalOf returns the worker principal ctx carries; without one, the
// pool.
func PrincipalOf(ctx context.Context) Principal {
	if p, ok := ctx.Value(principalKey{}).(Principal); ok {
		return p
	}
	return PoolPrincipal
}

// LeaseOwner is the lease owner a worker of p that calls itself worker
// holds its leases as: worker itself for the pool, else
// "ACCOUNT/KEY@worker". A worker ID has no '/' or '@' (ValidWorkerID), so
// no worker passes for another key's, and a key's leases are found by
// their prefix (LeaseOwnerPrefix).
func (p Principal) LeaseOwner(worker string) string {
	if p.Key == "" {
		return worker
	}
	return p.LeaseOwnerPrefix() + worker
}

// LeaseOwnerPrefix starts the lease owner of every worker of key p.
func (p Principal) LeaseOwnerPrefix() string { return AccountLeasePrefix(p.Account) + p.Key + "@" }

// AccountLeasePrefix starts the lease owner of every worker of every key
// of account.
func AccountLeasePrefix(account string) string { return account + "/" }

// Holds reports whether t is leased to a worker of p, when p is a key:
// a key's workers may read only what they hold. The pool may read any.
func (p Principal) Holds(t *Task) bool {
	return p.Key == "" || t.State == TaskLeased && strings.HasPrefix(t.LeaseOwner, p.LeaseOwnerPrefix())
}

// WorkerAccountOf returns the account of the worker key a lease owner
// holds its lease with (see Principal.LeaseOwner), or "" for the pool.
func WorkerAccountOf(leaseOwner string) string {
	account, _, _ := SplitLeaseOwner(leaseOwner)
	return account
}

// SplitLeaseOwner returns the parts of a lease owner (see
// Principal.LeaseOwner): the account and the name of the worker key it
// holds its leases with ("" and "" for the pool), and the worker's own ID.
func SplitLeaseOwner(leaseOwner string) (account, key, worker string) {
	account, rest, ok := strings.Cut(leaseOwner, "/")
	if !ok {
		return "", "", leaseOwner
	}
	key, worker, _ = strings.Cut(rest, "@")
	return account, key, worker
}
