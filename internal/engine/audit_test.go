package engine_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/store"
)

// auditLine is what an audit test checks of an entry.
type auditLine struct{ account, action, target string }

// auditLines lists the audit trail as an admin sees it, newest first.
func auditLines(t *testing.T, e *engine.Engine, p engine.ListAuditParams) ([]auditLine, string) {
	t.Helper()
	entries, next, err := e.ListAudit(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	lines := make([]auditLine, len(entries))
	for i, a := range entries {
		lines[i] = auditLine{a.Account, a.Action, a.Target}
	}
	return lines, next
}

func checkLines(t *testing.T, what string, got, want []auditLine) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d entries %v, want %d: %v", what, len(got), got, len(want), want)
		return
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s: entry %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// TestAuditRecordsEachAction does every action the audit trail records —
// an account created, a token issued and the others revoked, an upload,
// a job created, cancelled, retried, and retention deleting a job and
// uploads — and checks each entry's account, action and target, newest
// first, page by page and since a time; and that only an admin reads it.
func TestAuditRecordsEachAction(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		b := newRetention(t, s)
		ctx, ada := t.Context(), as(t.Context(), "ada")
		step := func() { b.clock.Advance(time.Minute) }
		if _, _, err := b.e.CreateAccount(ctx, domain.Account{Name: "ada"}); err != nil {
			t.Fatal(err)
		}
		step()
		if _, err := b.e.IssueToken(ctx, "ada", true); err != nil {
			t.Fatal(err)
		}
		step()
		since := b.clock.Now()
		up, err := b.e.CreateUpload(ada, strings.NewReader("id,x\na,1\nb,2\n"), -1)
		if err != nil {
			t.Fatal(err)
		}
		step()
		sp := spec(1)
		sp.Chunks, sp.UploadID, sp.ChunkRows = nil, up.ID, 1
		job, _, err := b.e.CreateJob(ada, sp, "")
		if err != nil {
			t.Fatal(err)
		}
		step()
		if _, err := b.e.CancelJob(ada, job.ID); err != nil {
			t.Fatal(err)
		}
		step()
		if _, err := b.e.RetryJob(ada, job.ID); err != nil {
			t.Fatal(err)
		}
		step()
		if _, err := b.e.CancelJob(ctx, job.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := b.e.CancelJob(ctx, job.ID); err != nil { // final already: nothing done, nothing recorded
			t.Fatal(err)
		}
		step()
		unused, err := b.e.CreateUpload(ctx, strings.NewReader("id,x\nc,3\n"), -1)
		if err != nil {
			t.Fatal(err)
		}

		all := []auditLine{
			{"admin", "upload.create", unused.ID},
			{"admin", "job.cancel", job.ID},
			{"ada", "job.retry", job.ID},
			{"ada", "job.cancel", job.ID},
			{"ada", "job.create", job.ID},
			{"ada", "upload.create", up.ID},
			{"admin", "token.revoke", "ada"},
			{"admin", "token.issue", "ada"},
			{"admin", "account.create", "ada"},
		}
		got, next := auditLines(t, b.e, engine.ListAuditParams{})
		checkLines(t, "the audit trail", got, all)
		if next != "" {
			t.Errorf("a whole trail has a next cursor %q", next)
		}
		got, next = auditLines(t, b.e, engine.ListAuditParams{Limit: 4})
		checkLines(t, "its first page of 4", got, all[:4])
		got, next = auditLines(t, b.e, engine.ListAuditParams{Limit: 4, Cursor: next})
		checkLines(t, "its second page", got, all[4:8])
		got, next = auditLines(t, b.e, engine.ListAuditParams{Limit: 4, Cursor: next})
		checkLines(t, "its third page", got, all[8:])
		if next != "" {
			t.Errorf("the last page has a next cursor %q", next)
		}
		got, _ = auditLines(t, b.e, engine.ListAuditParams{Since: since})
		checkLines(t, "since the first upload", got, all[:6])
		if _, _, err := b.e.ListAudit(ada, engine.ListAuditParams{}); !errors.Is(err, domain.ErrPermissionDenied) {
			t.Errorf("ListAudit by ada = %v, want ErrPermissionDenied", err)
		}
		if _, _, err := b.e.ListAudit(ctx, engine.ListAuditParams{Cursor: "bm9wZQ"}); !errors.Is(err, domain.ErrInvalidArgument) {
			t.Errorf("ListAudit with a cursor it never gave = %v, want ErrInvalidArgument", err)
		}

		// Retention deletes the job, both uploads and every entry above,
		// and records what it did as nobody's.
		b.clock.Advance(keepJobs + day)
		r, err := b.e.PruneExpired(ctx, engine.PruneExpiredParams{Retention: keepJobs, UploadRetention: keepUploads})
		if err != nil {
			t.Fatal(err)
		}
		if r.Jobs != 1 || r.Uploads != 2 || r.Audit != len(all) {
			t.Errorf("report %+v; want 1 job, 2 uploads and %d audit entries deleted", r, len(all))
		}
		got, _ = auditLines(t, b.e, engine.ListAuditParams{})
		if len(got) != 4 {
			t.Fatalf("after the pass: %v; want job.delete, two upload.delete and prune", got)
		}
		uploads := map[string]bool{got[1].target: true, got[2].target: true}
		checkLines(t, "after the pass", []auditLine{got[0], got[3]}, []auditLine{{"", "prune", ""}, {"", "job.delete", job.ID}})
		if got[1].action != "upload.delete" || got[2].action != "upload.delete" || got[1].account != "" || !uploads[up.ID] || !uploads[unused.ID] {
			t.Errorf("after the pass: %v; want upload.delete of %s and %s by \"\"", got, up.ID, unused.ID)
		}
		again, err := b.e.PruneExpired(ctx, engine.PruneExpiredParams{Retention: keepJobs, UploadRetention: keepUploads})
		if err != nil || again.Total() != 0 {
			t.Errorf("a second pass = %+v, %v; want nothing", again, err)
		}
		if got, _ = auditLines(t, b.e, engine.ListAuditParams{}); len(got) != 4 {
			t.Errorf("a pass that deleted nothing left %d entries, want the 4 before: no prune entry", len(got))
		}
	})
}

// TestAuditAccountChanges: changing an account's settings, disabling and
// enabling it are each recorded, by the admin who did it, with what
// changed; a change that changes nothing records nothing.
func TestAuditAccountChanges(t *testing.T) {
	t.Parallel()
	e := newEngine(openStore(t), engine.Config{})
	ctx := t.Context()
	if _, _, err := e.CreateAccount(ctx, domain.Account{Name: "ada"}); err != nil {
		t.Fatal(err)
	}
	weight, yes, no := 3, true, false
	for _, c := range []engine.AccountChange{
		{Weight: &weight},
		{Weight: &weight}, // nothing changes
		{Disabled: &yes},
		{Disabled: &no, Admin: &yes},
	} {
		if _, err := e.UpdateAccount(ctx, "ada", c); err != nil {
			t.Fatal(err)
		}
	}
	entries, _, err := e.ListAudit(ctx, engine.ListAuditParams{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range entries {
		got = append(got, a.Account+" "+a.Action+" "+a.Target+": "+a.Detail)
	}
	want := []string{
		"admin account.update ada: admin false → true",
		"admin account.enable ada: ",
		"admin account.disable ada: ",
		"admin account.update ada: weight 1 → 3",
		"admin account.create ada: admin false, disabled false, weight 1, max_running 0, max_jobs 0, max_storage 0; its first token issued",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the audit trail:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
