package auth

import (
	"context"
	"errors"
	"net/http"

	"github.com/scimesh/scimesh/internal/domain"
)

// Callers: every client request acts as an account (domain.Caller). The
// client token (CLIENT_AUTH_TOKEN) is the built-in admin account's; any
// other account's token is looked up in the database on every request, so
// that a revoked token or a disabled account is refused at once by every
// replica, with nothing cached to go stale. A server without a client
// token (loopback only) takes every caller for the admin, unless it sends
// an account's token.

// Accounts finds the account whose token a bearer token is: the engine,
// once the database answers (Bind).
type Accounts interface {
	// Authenticate returns the account of token, an error wrapping
	// domain.ErrUnauthenticated when it is no live account's, or another
	// error when the database could not tell.
	Authenticate(ctx context.Context, token string) (*domain.Account, error)
	// AuthenticateWorker returns the principal of worker key key, an
	// error wrapping domain.ErrUnauthenticated when it is no live key, or
	// another error when the database could not tell.
	AuthenticateWorker(ctx context.Context, key string) (domain.Principal, error)
}

// Database is where the accounts and the dashboard's sessions are kept:
// the engine.
type Database interface {
	Accounts
	SessionRegistry
}

// Bind sets where account tokens and sessions are looked up, once the
// database answers; every transport binds the gate it is given to its
// engine. It may be called while requests are served: until then an
// account's token, and any session, is answered 503.
func (g *Gate) Bind(db Database) {
	var a Accounts = db
	g.accounts.Store(&a)
	g.sessions.SetRegistry(db)
}

func (g *Gate) accountsOf() Accounts {
	if a := g.accounts.Load(); a != nil {
		return *a
	}
	return nil
}

// adminCaller is who the client token, and any caller of a server without
// one, acts as.
var adminCaller = domain.Caller{Account: domain.AdminAccount, Admin: true}

// CallerOf returns who a request with bearer token tok acts as on a client
// route, or the refusal: 401 for a missing or unknown token (a revoked one,
// or a disabled account's, included), 403 for another role's token, 503
// when the database could not tell.
func (g *Gate) CallerOf(ctx context.Context, tok string) (domain.Caller, *Error) {
	open := g.tokens.Client == ""
	switch {
	case tok == "" && open:
		return adminCaller, nil
	case tok == "":
		return domain.Caller{}, &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated,
			Message: "missing bearer token: send your account's token (or the client token) as 'Authorization: Bearer TOKEN'"}
	case Equal(tok, g.tokens.Client):
		return adminCaller, nil
	case domain.LooksLikeAccountToken(tok):
		return g.account(ctx, tok, open)
	case domain.LooksLikeWorkerKey(tok) && !open:
		if _, e := g.workerKey(ctx, tok); e != nil {
			return domain.Caller{}, e
		}
		return domain.Caller{}, workerKeyHere
	case open:
		return adminCaller, nil
	}
	if Equal(tok, g.tokens.Worker) || Equal(tok, g.tokens.Peer) {
		return domain.Caller{}, &Error{Status: http.StatusForbidden, Code: CodePermissionDenied,
			Message: "this token may not call this route; it needs an account's token or the client token"}
	}
	return domain.Caller{}, unknownToken
}

// account looks an account's token up; on an open server a token that is
// no account's leaves the caller the admin.
func (g *Gate) account(ctx context.Context, tok string, open bool) (domain.Caller, *Error) {
	accounts := g.accountsOf()
	if accounts == nil {
		return domain.Caller{}, dbNotAnswering
	}
	a, err := accounts.Authenticate(ctx, tok)
	switch {
	case errors.Is(err, domain.ErrUnauthenticated) && open:
		return adminCaller, nil
	case errors.Is(err, domain.ErrUnauthenticated):
		return domain.Caller{}, unknownToken
	case err != nil:
		return domain.Caller{}, dbNotAnswering
	}
	return domain.Caller{Account: a.Name, Admin: a.Admin}, nil
}

var (
	workerKeyHere = &Error{Status: http.StatusForbidden, Code: CodePermissionDenied,
		Message: "a worker key may call only the worker routes; use your account's token here"}
	unknownToken = &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated,
		Message: "unknown token: check the token you were given (a revoked token, or a disabled account's, is refused)"}
	dbNotAnswering = &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
		Message: "the token could not be checked: the database is not answering; retry later"}
)
