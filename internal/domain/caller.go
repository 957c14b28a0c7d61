package domain

import "context"

// Caller is who a client request acts as: an account, and whether it is an
// admin. The coordinator's gate puts it in the context of every client
// request; what the engine does for itself (sweeps, stitches, retention)
// has none and acts as the admin.
type Caller struct {
	Account string
	Admin   bool
}

// adminCaller is the caller of work that no request asked for.
var adminCaller = Caller{Account: AdminAccount, Admin: true}

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf returns the caller ctx carries; without one, the admin.
func CallerOf(ctx context.Context) Caller {
	if c, ok := ctx.Value(callerKey{}).(Caller); ok {
		return c
	}
	return adminCaller
}

// Sees reports whether c may see and act on what owner owns: its own, or
// anyone's for an admin.
func (c Caller) Sees(owner string) bool { return c.Admin || c.Account == owner }
