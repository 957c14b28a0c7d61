package engine

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Quotas: an account's max_jobs bounds its unfinished jobs and its
// max_storage the bytes of its uploads (max_running, which makes claims
// wait, is the claim's business). A creation past one is
// ErrQuotaExceeded and leaves nothing behind.
//
// Each is checked twice. First on the store alone, before anything is
// read or written, so that a creation bound to be refused costs nothing;
// then in the creating transaction, under the account's row lock
// (store.Querier.AccountLock), so that of two creations at once, on any
// replica, only one can take the last of a quota: the second waits for
// the first to commit, then counts what it made. The lock is taken only
// when the account has the quota, so accounts without one create
// without contention.

// quotaAccount returns the account owner whose quota has says it has one,
// locked when lock, or nil when it has none or no account exists.
func quotaAccount(ctx context.Context, q store.Querier, owner string, lock bool, has func(*domain.Account) bool) (*domain.Account, error) {
	a, err := q.AccountGet(ctx, owner)
	if errors.Is(err, store.ErrNotFound) || err == nil && !has(a) {
		return nil, nil // an account that is not recorded has no quotas
	}
	if err == nil && lock {
		a, err = q.AccountLock(ctx, owner)
	}
	if err != nil {
		return nil, fmt.Errorf("read the quotas of account %s: %w", owner, err)
	}
	return a, nil
}

// checkJobQuota refuses a new job of owner when it has max_jobs
// unfinished jobs already.
func checkJobQuota(ctx context.Context, q store.Querier, owner string, lock bool) error {
	a, err := quotaAccount(ctx, q, owner, lock, func(a *domain.Account) bool { return a.MaxJobs > 0 })
	if a == nil || err != nil {
		return err
	}
	n, err := q.JobCountUnfinished(ctx, owner)
	if err != nil {
		return fmt.Errorf("count the unfinished jobs of account %s: %w", owner, err)
	}
	if n >= a.MaxJobs {
		return fmt.Errorf("quota max_jobs: account %s has %d unfinished jobs of %d allowed; wait for one to finish (or cancel one), or ask an admin to raise the quota: %w",
			owner, n, a.MaxJobs, domain.ErrQuotaExceeded)
	}
	return nil
}

// storageUse is an account's max_storage and the bytes its uploads use.
type storageUse struct {
	account   string
	max, used int64 // max 0: no quota
}

// left is how many bytes more the account may upload, or -1 for any.
func (s storageUse) left() int64 {
	if s.max == 0 {
		return -1
	}
	return max(s.max-s.used, 0)
}

// refuse is the error of an upload past the quota; why says how it
// passed it.
func (s storageUse) refuse(why string) error {
	return fmt.Errorf("quota max_storage: account %s's uploads use %d bytes of %d allowed, and %s; nothing of it was kept. "+
		"Uploads are freed by upload retention once no job needs them; or ask an admin to raise the quota: %w",
		s.account, s.used, s.max, why, domain.ErrQuotaExceeded)
}

// tooBig is why an upload of n bytes is refused.
func tooBig(n int64) string { return fmt.Sprintf("this upload of %d bytes does not fit", n) }

// storageOf reads owner's max_storage and the bytes its uploads use.
func storageOf(ctx context.Context, q store.Querier, owner string, lock bool) (storageUse, error) {
	u := storageUse{account: owner}
	a, err := quotaAccount(ctx, q, owner, lock, func(a *domain.Account) bool { return a.MaxStorage > 0 })
	if a == nil || err != nil {
		return u, err
	}
	u.max = a.MaxStorage
	if u.used, err = q.UploadSumBytes(ctx, owner); err != nil {
		return u, fmt.Errorf("sum the uploads of account %s: %w", owner, err)
	}
	return u, nil
}

// quotaReader reads from r until reading more would pass the bytes its
// storageUse leaves; then it fails with the quota's error and reads no
// more.
type quotaReader struct {
	r    io.Reader
	use  storageUse
	left int64 // bytes it may still read
	n    int64 // read so far
	err  error // the quota's, once passed
}

func (q *quotaReader) Read(p []byte) (int, error) {
	if q.err != nil {
		return 0, q.err
	}
	n, err := q.r.Read(p)
	if int64(n) > q.left {
		q.err = q.use.refuse(fmt.Sprintf("this upload went over it after %d bytes and was cut off there", q.n+q.left))
		return 0, q.err
	}
	q.n += int64(n)
	q.left -= int64(n)
	return n, err
}
