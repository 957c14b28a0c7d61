package ui

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
)

// The usage page: worker time per account per day, as stacked bars drawn
// on the server (an SVG, like a job's chart), and a table of each
// account's total. It reads engine.ListUsage, so an account that is not
// an admin sees its own usage only. Below, what each account's machines
// (its worker keys' workers) did, from engine.ListWorkerUsage: an
// account that is not an admin sees its own machines' only.

// Bounds of the usage page's period.
const (
	usageDefaultDays = 30
	usageMaxDays     = 366
)

// usageColors tell the accounts apart in the chart, in order of name.
var usageColors = []string{"#2463eb", "#e8590c", "#2f9e44", "#ae3ec9", "#f08c00", "#0c8599", "#c2255c", "#5c7cfa", "#868e96", "#66a80f"}

// usageData is what usage.html shows.
type usageData struct {
	Since, Until string // the period's first day and the day after its last, YYYY-MM-DD
	Days         int
	Chart        usageChart
	Accounts     []usageAccount
	Total        usageAccount
	// Workers is what the workers of each account's keys did over the
	// period, whoever's jobs they ran (WorkerAccount "" for the pool): an
	// admin's page shows every account's, another's its own alone.
	Workers []engine.UsageEntry
}

// usageAccount is an account's total over the period.
type usageAccount struct {
	Name  string
	Color string
	Tasks int64
	Hours float64
	Share float64 // of the total worker time, 0..1
}

// usageChart is the stacked bars of worker hours per day and account.
type usageChart struct {
	W, H, Base float64 // the drawing's size; the bars' baseline
	Top        float64 // where the busiest day's bar ends, under the y axis' label
	Bars       []usageBar
	Labels     []usageLabel
	MaxHours   float64 // the value at the top of the y axis
}

// usageBar is one account's part of one day's bar.
type usageBar struct {
	X, Y, W, H float64
	Color      string
	Title      string
}

// usageLabel is a day named under the x axis.
type usageLabel struct {
	X    float64
	Text string
}

func (u *UI) usage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, until, err := usagePeriod(q.Get("since"), q.Get("until"), time.Now())
	if err != nil {
		u.fail(w, r, err)
		return
	}
	entries, err := u.e.ListUsage(r.Context(), engine.ListUsageParams{Since: since, Until: until,
		By: []engine.UsageField{engine.UsageDay, engine.UsageAccount}})
	if err != nil {
		u.fail(w, r, err)
		return
	}
	workers, err := u.e.ListWorkerUsage(r.Context(), engine.ListUsageParams{Since: since, Until: until})
	if err != nil {
		u.fail(w, r, err)
		return
	}
	d := newUsageData(entries, since, until)
	d.Workers = workers
	u.render(w, r, 0, "usage", "Usage", "usage", d)
}

// usagePeriod reads the page's period: whole UTC days from since up to
// until, excluded; by default the last usageDefaultDays days, today
// included.
func usagePeriod(sinceArg, untilArg string, now time.Time) (since, until time.Time, err error) {
	if since, err = engine.ParseInstant("since", sinceArg); err != nil {
		return since, until, err
	}
	if until, err = engine.ParseInstant("until", untilArg); err != nil {
		return since, until, err
	}
	if until.IsZero() {
		until = now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	}
	until = until.UTC().Add(24*time.Hour - time.Nanosecond).Truncate(24 * time.Hour) // a time counts its whole day
	if since.IsZero() {
		since = until.Add(-usageDefaultDays * 24 * time.Hour)
	}
	since = since.UTC().Truncate(24 * time.Hour)
	days := int(until.Sub(since) / (24 * time.Hour))
	if days < 1 || days > usageMaxDays {
		return since, until, domain.Invalidf("the period from %s to %s is %d days; show 1 to %d days at once",
			since.Format(time.DateOnly), until.Format(time.DateOnly), days, usageMaxDays)
	}
	return since, until, nil
}

// newUsageData lays out the usage of each day and account in [since,
// until) as the page shows it.
func newUsageData(entries []engine.UsageEntry, since, until time.Time) usageData {
	days := int(until.Sub(since) / (24 * time.Hour))
	d := usageData{Since: since.Format(time.DateOnly), Until: until.Format(time.DateOnly), Days: days}
	index := map[string]int{} // account → its place in d.Accounts
	for _, e := range entries {
		if _, ok := index[e.Account]; !ok {
			index[e.Account] = -1
			d.Accounts = append(d.Accounts, usageAccount{Name: e.Account})
		}
	}
	slices.SortFunc(d.Accounts, func(a, b usageAccount) int { return strings.Compare(a.Name, b.Name) })
	for i := range d.Accounts {
		d.Accounts[i].Color = usageColors[i%len(usageColors)]
		index[d.Accounts[i].Name] = i
	}
	perDay := make([][]float64, days) // hours, by day then account
	for i := range perDay {
		perDay[i] = make([]float64, len(d.Accounts))
	}
	for _, e := range entries {
		day, err := time.Parse(time.DateOnly, e.Day)
		if err != nil {
			continue // cannot happen: the engine writes days so
		}
		i := int(day.Sub(since) / (24 * time.Hour))
		if i < 0 || i >= days {
			continue // an hour of the day before since, which overlaps nothing shown
		}
		a := index[e.Account]
		hours := e.WorkerSeconds / 3600
		perDay[i][a] += hours
		d.Accounts[a].Tasks += e.Tasks
		d.Accounts[a].Hours += hours
		d.Total.Tasks += e.Tasks
		d.Total.Hours += hours
	}
	for i := range d.Accounts {
		if d.Total.Hours > 0 {
			d.Accounts[i].Share = d.Accounts[i].Hours / d.Total.Hours
		}
	}
	d.Chart = newUsageChart(perDay, d.Accounts, since)
	return d
}

// newUsageChart stacks each day's hours by account, the first account at
// the bottom, under a y axis topped by the busiest day.
func newUsageChart(perDay [][]float64, accounts []usageAccount, since time.Time) usageChart {
	c := usageChart{W: 600, H: 200, Base: 180, Top: 16}
	for _, day := range perDay {
		var sum float64
		for _, h := range day {
			sum += h
		}
		c.MaxHours = max(c.MaxHours, sum)
	}
	slot := c.W / float64(max(len(perDay), 1))
	for i, day := range perDay {
		x := float64(i) * slot
		at := since.Add(time.Duration(i) * 24 * time.Hour).Format(time.DateOnly)
		y := c.Base
		for a, h := range day {
			if h <= 0 {
				continue
			}
			bh := (c.Base - c.Top) * h / c.MaxHours
			y -= bh
			c.Bars = append(c.Bars, usageBar{X: x + slot*0.1, Y: y, W: slot * 0.8, H: bh, Color: accounts[a].Color,
				Title: fmt.Sprintf("%s on %s: %.2f worker hours", accounts[a].Name, at, h)})
		}
	}
	// The first and last days, and a few between, under the axis.
	step := max(len(perDay)/6, 1)
	for i := 0; i < len(perDay); i += step {
		c.Labels = append(c.Labels, usageLabel{X: float64(i)*slot + slot/2, Text: since.Add(time.Duration(i) * 24 * time.Hour).Format("01-02")})
	}
	return c
}
