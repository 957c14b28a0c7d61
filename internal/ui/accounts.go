package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
)

// The accounts page: an admin lists the accounts, adds one, changes its
// weight, quotas and admin flag, disables or enables it and issues a
// token, which the page shows once. For anyone else the page does not
// exist (404), as the nav does not link it.

// adminOnly answers 404 to a caller that is not an admin, before the
// request's form is read.
func adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !domain.CallerOf(r.Context()).Admin {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	}
}

type accountsData struct {
	Accounts []*domain.Account
	Token    *shownToken // just made: shown this once
}

// shownToken is a token the page shows once.
type shownToken struct {
	Account, Token string
	Revoked        bool // the account's other tokens were revoked
}

func (u *UI) accounts(w http.ResponseWriter, r *http.Request) {
	u.showAccounts(w, r, nil)
}

// showAccounts renders the accounts page, with token when one was just
// made.
func (u *UI) showAccounts(w http.ResponseWriter, r *http.Request, token *shownToken) {
	list, err := u.e.ListAccounts(r.Context())
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.render(w, r, 0, "accounts", "Accounts", "accounts", accountsData{Accounts: list, Token: token})
}

// addAccount creates an account from the add form and shows its token.
func (u *UI) addAccount(w http.ResponseWriter, r *http.Request) {
	var c engine.AccountChange
	if err := readSettings(r, &c); err != nil {
		u.fail(w, r, err)
		return
	}
	a := domain.Account{Name: strings.TrimSpace(r.PostFormValue("name")), Weight: 1}
	if c.Weight != nil && *c.Weight == 0 { // the engine takes 0 for the default
		u.fail(w, r, domain.Invalidf("weight 0: use 1 to %d", domain.MaxAccountWeight))
		return
	}
	c.Apply(&a)
	made, token, err := u.e.CreateAccount(r.Context(), a)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.log.InfoContext(r.Context(), "account created from the dashboard", "account", made.Name)
	u.showAccounts(w, r, &shownToken{Account: made.Name, Token: token})
}

// setAccount changes an account's settings from its row's form.
func (u *UI) setAccount(w http.ResponseWriter, r *http.Request) {
	var c engine.AccountChange
	if err := readSettings(r, &c); err != nil {
		u.fail(w, r, err)
		return
	}
	u.changeAccount(w, r, c)
}

// disableAccount and enableAccount set whether an account is disabled.
func (u *UI) disableAccount(w http.ResponseWriter, r *http.Request) {
	yes := true
	u.changeAccount(w, r, engine.AccountChange{Disabled: &yes})
}

func (u *UI) enableAccount(w http.ResponseWriter, r *http.Request) {
	no := false
	u.changeAccount(w, r, engine.AccountChange{Disabled: &no})
}

// changeAccount applies c to the account the path names and goes back to
// the accounts page.
func (u *UI) changeAccount(w http.ResponseWriter, r *http.Request, c engine.AccountChange) {
	name := r.PathValue("name")
	if _, err := u.e.UpdateAccount(r.Context(), name, c); err != nil {
		u.fail(w, r, err)
		return
	}
	u.log.InfoContext(r.Context(), "account changed from the dashboard", "account", name)
	http.Redirect(w, r, "/ui/accounts#account-"+url.PathEscape(name), http.StatusSeeOther)
}

// issueToken makes a new token of the account the path names and shows
// it; with the form's revoke_others, the account's other tokens are
// revoked.
func (u *UI) issueToken(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	revoke := r.PostFormValue("revoke_others") == "on"
	token, err := u.e.IssueToken(r.Context(), name, revoke)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.log.InfoContext(r.Context(), "token issued from the dashboard", "account", name, "revoke_others", revoke)
	u.showAccounts(w, r, &shownToken{Account: name, Token: token, Revoked: revoke})
}

// readSettings reads the settings a form gives into c: a field left
// empty or out changes nothing. The admin flag is the form's last value
// of "admin" (a hidden "off" before the checkbox), when it has one.
func readSettings(r *http.Request, c *engine.AccountChange) error {
	count := func(field string, dst **int) error {
		v := strings.TrimSpace(r.PostFormValue(field))
		if v == "" {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return domain.Invalidf("%s %q is not a whole number", field, v)
		}
		*dst = &n
		return nil
	}
	for field, dst := range map[string]**int{"weight": &c.Weight, "max_running": &c.MaxRunning, "max_jobs": &c.MaxJobs} {
		if err := count(field, dst); err != nil {
			return err
		}
	}
	if v := strings.TrimSpace(r.PostFormValue("max_storage")); v != "" {
		n, err := domain.ParseSize(v)
		if err != nil {
			return fmt.Errorf("max_storage: %w", err)
		}
		c.MaxStorage = &n
	}
	if vs := r.PostForm["admin"]; len(vs) > 0 {
		admin := vs[len(vs)-1] == "on"
		c.Admin = &admin
	}
	return nil
}

// sizeField is n bytes as a form shows it: in a unit when that is exact,
// so that saving the form unchanged keeps it.
func sizeField(n int64) string {
	if t := domain.SizeText(n); n != 0 {
		if back, err := domain.ParseSize(t); err == nil && back == n {
			return t
		}
	}
	return strconv.FormatInt(n, 10)
}
