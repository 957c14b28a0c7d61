package domain

import (
	"strings"
	"time"
)

// Account is who a client request acts as: a person or a program of the
// lab that shares one SciMesh. Jobs, uploads and task trees belong to the
// account that created them; an admin sees and acts on everyone's.
type Account struct {
	Name     string
	Admin    bool
	Disabled bool // its tokens are refused
	// Weight is its share of free workers against the other accounts'
	// (fair share): at least 1.
	Weight int
	// MaxRunning, MaxJobs and MaxStorage are its quotas: tasks leased at
	// once, unfinished jobs, bytes of uploads; 0 is none.
	MaxRunning int
	MaxJobs    int
	MaxStorage int64

	CreatedAt time.Time
	UpdatedAt time.Time
}

// AdminAccount is the built-in admin account, whose token is
// CLIENT_AUTH_TOKEN; what existed before accounts belongs to it.
const AdminAccount = "admin"

// Bounds of an account's settings.
const (
	MaxAccountWeight = 1_000_000
	// MaxAccountCount bounds the quotas that count tasks and jobs, as the
	// databases keep them in 32 bits.
	MaxAccountCount = 1<<31 - 1
	maxAccountName  = 63
)

// ValidAccountName reports whether name is an account's name:
// [a-z0-9][a-z0-9._-]{0,62}.
func ValidAccountName(name string) bool {
	if len(name) == 0 || len(name) > maxAccountName {
		return false
	}
	for i, c := range []byte(name) {
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// Validate reports the first rule a breaks, as an ErrInvalidArgument.
func (a *Account) Validate() error {
	switch {
	case !ValidAccountName(a.Name):
		return Invalidf("account name %q: use 1 to 63 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit", a.Name)
	case a.Weight < 1 || a.Weight > MaxAccountWeight:
		return Invalidf("weight %d: use 1 to %d", a.Weight, MaxAccountWeight)
	case a.MaxRunning < 0 || a.MaxJobs < 0 || a.MaxStorage < 0:
		return Invalidf("quotas are 0 (none) or more: max_running %d, max_jobs %d, max_storage %d", a.MaxRunning, a.MaxJobs, a.MaxStorage)
	case a.MaxRunning > MaxAccountCount || a.MaxJobs > MaxAccountCount:
		return Invalidf("max_running %d, max_jobs %d: at most %d each (0 is none)", a.MaxRunning, a.MaxJobs, MaxAccountCount)
	}
	return nil
}

// AccountTokenPrefix starts every account token, so that a token pasted
// where it should not be is recognised for what it is.
const AccountTokenPrefix = "scimesh_"

// LooksLikeAccountToken reports whether token has the form of an account
// token, so that one of another form is refused without a lookup.
func LooksLikeAccountToken(token string) bool {
	return strings.HasPrefix(token, AccountTokenPrefix) && len(token) == len(AccountTokenPrefix)+64
}
