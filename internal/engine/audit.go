package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// The audit trail (SPEC §9): who changed what, each entry written in the
// transaction of the change it records, so that it is there exactly when
// the change is. docs/api.md lists the actions.
const (
	actionAccountCreate  = "account.create"
	actionAccountUpdate  = "account.update"
	actionAccountDisable = "account.disable"
	actionAccountEnable  = "account.enable"
	actionTokenIssue     = "token.issue"
	actionTokenRevoke    = "token.revoke"
	actionJobCreate      = "job.create"
	actionJobCancel      = "job.cancel"
	actionJobRetry       = "job.retry"
	actionJobDelete      = "job.delete"
	actionUploadCreate   = "upload.create"
	actionUploadDelete   = "upload.delete"
	actionPrune          = "prune"
	actionKeyAdd         = "worker_key.add"
	actionKeyRevoke      = "worker_key.revoke"
	actionKeyTrust       = "worker_key.trust"
	actionKeyUntrust     = "worker_key.untrust"
)

// coordinatorAccount is the account of the entries of what the
// coordinator does by itself (retention) or an operator does on the
// database (scimesh prune): nobody's.
const coordinatorAccount = ""

// audit records, in the transaction of q, that the caller of ctx did
// action to target (a job's or upload's ID, an account's name), with
// detail for people.
func (e *Engine) audit(ctx context.Context, q store.Querier, action, target, detail string) error {
	return e.auditAs(ctx, q, domain.CallerOf(ctx).Account, action, target, detail)
}

// auditAs is audit by account.
func (e *Engine) auditAs(ctx context.Context, q store.Querier, account, action, target, detail string) error {
	entry := &store.AuditEntry{At: e.now(), Account: account, Action: action, Target: target, Detail: detail}
	if err := q.AuditInsert(ctx, []*store.AuditEntry{entry}); err != nil {
		return fmt.Errorf("record %s of %s in the audit trail: %w", action, target, err)
	}
	return nil
}

// ListAuditParams selects a page of the audit trail.
type ListAuditParams struct {
	Since  time.Time // zero: from the oldest entry kept
	Limit  int       // 1-1000; 0 means 50
	Cursor string    // from a previous page's next cursor
}

// AuditEntry is one entry of the audit trail.
type AuditEntry = store.AuditEntry

// ListAudit returns a page of the audit trail, newest first, and the
// cursor of the next page ("" at the end). Only admins may read it:
// anyone else is ErrPermissionDenied.
func (e *Engine) ListAudit(ctx context.Context, p ListAuditParams) ([]*AuditEntry, string, error) {
	if c := domain.CallerOf(ctx); !c.Admin {
		return nil, "", fmt.Errorf("account %s may not read the audit trail; only an admin may: %w", c.Account, domain.ErrPermissionDenied)
	}
	limit, err := pageLimit(p.Limit)
	if err != nil {
		return nil, "", err
	}
	lp := &store.AuditListParams{Since: p.Since, Limit: limit + 1}
	if p.Cursor != "" {
		s, err := decodeCursor(p.Cursor)
		if err != nil {
			return nil, "", err
		}
		micros, id, ok := strings.Cut(s, "|")
		us, uerr := strconv.ParseInt(micros, 10, 64)
		n, ierr := strconv.ParseInt(id, 10, 64)
		if !ok || uerr != nil || ierr != nil {
			return nil, "", domain.Invalidf("cursor %q is not one this server handed out; pass next_cursor from the previous page", p.Cursor)
		}
		lp.After = &store.AuditCursor{At: time.UnixMicro(us).UTC(), ID: n}
	}
	entries, err := e.store.AuditList(ctx, lp)
	if err != nil {
		return nil, "", mapStoreErr(fmt.Errorf("list the audit trail: %w", err))
	}
	next := ""
	if len(entries) > limit {
		entries = entries[:limit]
		last := entries[limit-1]
		next = encodeCursor(strconv.FormatInt(last.At.UnixMicro(), 10) + "|" + strconv.FormatInt(last.ID, 10))
	}
	return entries, next, nil
}
