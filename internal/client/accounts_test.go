package client_test

import (
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/client"
)

// TestAccounts: the admin manages accounts through the client, the new
// account's token acts as it at once, a non-admin is refused, and an
// account's quota is a quota_exceeded error that is not worth retrying.
func TestAccounts(t *testing.T) {
	t.Parallel()
	c := setup(t)
	ctx := t.Context()
	one, two := 1, 2
	a, err := c.user.CreateAccount(ctx, "alice", client.AccountSettings{Weight: &two, MaxJobs: &one})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "alice" || a.Weight != 2 || a.MaxJobs != 1 || !strings.HasPrefix(a.Token, "scimesh_") {
		t.Fatalf("created %+v", a)
	}
	alice := client.New(c.url, a.Token)
	defer alice.CloseIdleConnections()
	if own, err := alice.Account(ctx); err != nil || own.Name != "alice" || own.Usage == nil {
		t.Fatalf("alice's own account: %+v, %v", own, err)
	}
	_, err = alice.ListAccounts(ctx)
	wantCode(t, err, 403, client.CodePermissionDenied)

	yes := true
	if got, err := c.user.UpdateAccount(ctx, "alice", client.AccountSettings{Disabled: &yes}); err != nil || !got.Disabled || got.Weight != 2 {
		t.Fatalf("disable alice: %+v, %v", got, err)
	}
	_, err = alice.Account(ctx)
	wantCode(t, err, 401, client.CodeUnauthenticated)
	no := false
	if _, err := c.user.UpdateAccount(ctx, "alice", client.AccountSettings{Disabled: &no}); err != nil {
		t.Fatal(err)
	}
	token, err := c.user.IssueToken(ctx, "alice", true)
	if err != nil {
		t.Fatal(err)
	}
	_, err = alice.Account(ctx)
	wantCode(t, err, 401, client.CodeUnauthenticated)
	alice = client.New(c.url, token)
	defer alice.CloseIdleConnections()
	if got, err := c.user.GetAccount(ctx, "alice"); err != nil || got.Usage == nil || got.Token != "" {
		t.Fatalf("GetAccount(alice): %+v, %v", got, err)
	}
	if list, err := c.user.ListAccounts(ctx); err != nil || len(list) != 2 {
		t.Fatalf("ListAccounts: %v, %v", list, err)
	}

	req := &client.JobRequest{Workload: "w", Input: client.JobInput{Chunks: chunks(1)}}
	if _, err := alice.CreateJob(ctx, req, ""); err != nil {
		t.Fatal(err)
	}
	_, err = alice.CreateJob(ctx, req, "")
	wantCode(t, err, 429, client.CodeQuotaExceeded)
	if client.IsRetryable(err) {
		t.Errorf("a quota is retryable: %v", err)
	}
}
