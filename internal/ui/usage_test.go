package ui

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/sqlite"
)

// TestUsagePage draws two accounts' worker time of the last days as
// stacked bars with a table of totals, for an admin; an account that is
// not an admin sees only its own; a period that cannot be shown is 400.
func TestUsagePage(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "ui.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	today := time.Now().UTC().Truncate(24 * time.Hour)
	day := func(n int) time.Time { return today.AddDate(0, 0, -n) }
	err = s.UsageAdd(t.Context(), []store.UsageRow{
		{Hour: day(0).Add(time.Hour), Account: "ada", Workload: "w", Tasks: 3, WorkerMicros: 5400 * 1e6},
		{Hour: day(0).Add(2 * time.Hour), Account: "bob", Workload: "w", Tasks: 1, WorkerMicros: 1800 * 1e6},
		{Hour: day(2), Account: "ada", Workload: "w", WorkerAccount: "bob", Tasks: 2, WorkerMicros: 3600 * 1e6}, // run by bob's machines
		{Hour: day(40), Account: "bob", Workload: "w", Tasks: 9, WorkerMicros: 9 * 3600 * 1e6},                  // before the default period
	})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := engine.New(s, engine.Config{Logger: log})
	u, err := New(e, Config{Gate: auth.NewGate(auth.Tokens{Client: "ctok"}), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	_, bob, err := e.CreateAccount(t.Context(), domain.Account{Name: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	page := func(query, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/ui/usage"+query, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	bars := regexp.MustCompile(`<title>(\w+) on (\S+): ([0-9.]+) worker hours</title>`)
	rows := regexp.MustCompile(`(?s)<tr class="account">.*?<td>(\w+)</td><td>(\d+)</td><td>([0-9.]+)</td><td>(\d+%)</td>`)

	status, body := page("", "ctok")
	if status != http.StatusOK {
		t.Fatalf("usage page: %d\n%s", status, body)
	}
	if !strings.Contains(body, `<a href="/ui/usage" class="here">Usage</a>`) {
		t.Errorf("the nav does not mark Usage as the page shown")
	}
	got := bars.FindAllStringSubmatch(body, -1)
	want := [][]string{
		{"ada", day(2).Format(time.DateOnly), "1.00"},
		{"ada", day(0).Format(time.DateOnly), "1.50"},
		{"bob", day(0).Format(time.DateOnly), "0.50"},
	}
	if len(got) != len(want) {
		t.Fatalf("bars %v, want %v", got, want)
	}
	for i := range want {
		if got[i][1] != want[i][0] || got[i][2] != want[i][1] || got[i][3] != want[i][2] {
			t.Errorf("bar %d is %v, want %v", i, got[i][1:], want[i])
		}
	}
	table := rows.FindAllStringSubmatch(body, -1)
	if len(table) != 2 || table[0][1] != "ada" || table[0][2] != "5" || table[0][3] != "2.50" || table[0][4] != "83%" ||
		table[1][1] != "bob" || table[1][2] != "1" || table[1][3] != "0.50" || table[1][4] != "17%" {
		t.Errorf("table %v; want ada 5 tasks 2.50 h 83%%, bob 1 task 0.50 h 17%%", table)
	}

	workers := regexp.MustCompile(`<tr class="workers"><td>(\w+)</td><td>(\d+)</td><td>([0-9.]+)</td></tr>`)
	if got := workers.FindAllStringSubmatch(body, -1); len(got) != 2 || fmt.Sprint(got[0][1:]) != "[pool 4 7200.0]" ||
		fmt.Sprint(got[1][1:]) != "[bob 2 3600.0]" {
		t.Errorf("the admin's table of workers' work: %v; want the pool's 4 tasks in 7200 s, bob's machines' 2 in 3600 s", got)
	}

	_, body = page("", bob)
	if got := bars.FindAllStringSubmatch(body, -1); len(got) != 1 || got[0][1] != "bob" {
		t.Errorf("bob's page shows bars %v; want his own only", got)
	}
	if got := workers.FindAllStringSubmatch(body, -1); len(got) != 1 || fmt.Sprint(got[0][1:]) != "[bob 2 3600.0]" {
		t.Errorf("bob's table of workers' work: %v; want his machines' 2 tasks in 3600 s (of ada's job) alone", got)
	}
	_, body = page("?since="+day(45).Format(time.DateOnly)+"&until="+day(30).Format(time.DateOnly), "ctok")
	if got := bars.FindAllStringSubmatch(body, -1); len(got) != 1 || got[0][1] != "bob" || got[0][3] != "9.00" {
		t.Errorf("the page of days 45 to 30 ago shows %v; want bob's 9 hours", got)
	}
	_, body = page("?since="+day(20).Format(time.DateOnly)+"&until="+day(10).Format(time.DateOnly), "ctok")
	if !strings.Contains(body, "No worker time charged") {
		t.Errorf("a period without usage does not say so:\n%s", body)
	}
	for _, q := range []string{"?since=last-week", "?since=2020-01-01", "?since=2026-03-02&until=2026-03-01"} {
		if status, _ := page(q, "ctok"); status != http.StatusBadRequest {
			t.Errorf("usage page%s: %d, want 400", q, status)
		}
	}
}

// TestUsagePeriod: whole UTC days, until excluded, the last 30 days by
// default, a time counting its whole day.
func TestUsagePeriod(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	for _, tc := range []struct{ since, until, wantSince, wantUntil string }{
		{"", "", "2026-02-13", "2026-03-15"},
		{"2026-03-01", "", "2026-03-01", "2026-03-15"},
		{"2026-03-01T23:00:00Z", "2026-03-03T00:00:01Z", "2026-03-01", "2026-03-04"},
		{"", "2026-03-02", "2026-01-31", "2026-03-02"},
	} {
		since, until, err := usagePeriod(tc.since, tc.until, now)
		if err != nil || since.Format(time.DateOnly) != tc.wantSince || until.Format(time.DateOnly) != tc.wantUntil {
			t.Errorf("usagePeriod(%q, %q) = %s, %s, %v; want %s, %s", tc.since, tc.until, since, until, err, tc.wantSince, tc.wantUntil)
		}
	}
}
