package auth

import (
	"context"
	"errors"
	"net/http"

	"github.com/scimesh/scimesh/internal/domain"
)

// Workers: every worker request acts as a principal (domain.Principal).
// The worker token (WORKER_AUTH_TOKEN) is the installation's trusted
// pool. A worker key of an account is looked up in the database on every
// request, as an account's token is, so that a revoked key, a key whose
// trust changed, or a disabled account's key is answered as it is now by
// every replica. A server without a worker token (loopback only) takes
// every worker for the pool, unless it sends a live worker key.

// workerOf returns who r acts as on a worker route, or the refusal: 401
// for a missing or unknown token (a revoked key, or a disabled account's,
// included), 403 for another role's token or an account's, 503 when the
// database could not tell.
func (g *Gate) workerOf(r *http.Request) (domain.Principal, *Error) {
	tok := Bearer(r.Header)
	if !domain.LooksLikeWorkerKey(tok) {
		return domain.PoolPrincipal, g.check(r, Worker)
	}
	p, e := g.workerKey(r.Context(), tok)
	if e == unknownToken && g.tokens.Worker == "" {
		return domain.PoolPrincipal, nil
	}
	return p, e
}

// workerKey looks a worker key up.
func (g *Gate) workerKey(ctx context.Context, tok string) (domain.Principal, *Error) {
	accounts := g.accountsOf()
	if accounts == nil {
		return domain.Principal{}, dbNotAnswering
	}
	p, err := accounts.AuthenticateWorker(ctx, tok)
	switch {
	case errors.Is(err, domain.ErrUnauthenticated):
		return domain.Principal{}, unknownToken
	case err != nil:
		return domain.Principal{}, dbNotAnswering
	}
	return p, nil
}
