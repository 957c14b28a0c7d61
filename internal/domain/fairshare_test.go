package domain_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func names(accounts []domain.FairAccount, picks []int) []string {
	out := make([]string, len(picks))
	for i, p := range picks {
		out[i] = accounts[p].Name
	}
	return out
}

func TestFairAccounts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		accounts []domain.FairAccount
		n        int
		want     []string
	}{
		{"weights 1:3 from nothing leased", []domain.FairAccount{{Name: "a", Weight: 1}, {Name: "b", Weight: 3}}, 8,
			[]string{"a", "b", "b", "b", "a", "b", "b", "b"}},
		{"the least leased per weight first", []domain.FairAccount{{Name: "a", Weight: 1, Leased: 2}, {Name: "b", Weight: 2, Leased: 2}}, 3,
			[]string{"b", "b", "a"}},
		{"ties to the account served longest ago, never served first",
			[]domain.FairAccount{{Name: "a", ServedAt: t0.Add(2)}, {Name: "b", ServedAt: t0.Add(1)}, {Name: "c"}}, 6,
			[]string{"c", "b", "a", "c", "b", "a"}},
		{"ties served at the same time by name", []domain.FairAccount{{Name: "b", ServedAt: t0}, {Name: "a", ServedAt: t0}}, 2,
			[]string{"a", "b"}},
		{"an account at its max_running gets nothing",
			[]domain.FairAccount{{Name: "a", MaxRunning: 2, Leased: 2}, {Name: "b", Leased: 9}}, 2, []string{"b", "b"}},
		{"max_running caps what one claim gives", []domain.FairAccount{{Name: "a", MaxRunning: 3, Leased: 1}}, 5, []string{"a", "a"}},
		{"what an account has runnable caps it", []domain.FairAccount{{Name: "a", Max: 1}, {Name: "b", Leased: 5}}, 3,
			[]string{"a", "b", "b"}},
		{"weight 0 counts as 1", []domain.FairAccount{{Name: "a"}, {Name: "b", Weight: 1, ServedAt: t0}}, 4,
			[]string{"a", "b", "a", "b"}},
		{"nothing to give", nil, 3, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := names(tc.accounts, domain.FairAccounts(tc.accounts, tc.n, 1))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFairAccountsAsSingleClaims checks that a claim of n hands out its
// tasks as n claims of one in a row would, each serving an account and
// so raising its count and making it the one served last.
func TestFairAccountsAsSingleClaims(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		accounts := make([]domain.FairAccount, 1+r.IntN(6))
		for i := range accounts {
			accounts[i] = domain.FairAccount{Name: string(rune('a' + i)), Weight: 1 + r.IntN(4), Leased: r.IntN(5)}
			if r.IntN(3) > 0 {
				accounts[i].ServedAt = t0.Add(time.Duration(r.IntN(3)) * time.Second)
			}
			if r.IntN(3) == 0 {
				accounts[i].MaxRunning = accounts[i].Leased + r.IntN(3)
			}
			if r.IntN(3) == 0 {
				accounts[i].Max = 1 + r.IntN(4)
			}
		}
		n := 1 + r.IntN(20)
		got := domain.FairAccounts(slices.Clone(accounts), n, 1)
		var want []int
		one := slices.Clone(accounts)
		for i := range n {
			p := domain.FairAccounts(one, 1, 1)
			if len(p) == 0 {
				break
			}
			want = append(want, p[0])
			one[p[0]].Leased++
			one[p[0]].ServedAt = t0.Add(time.Hour + time.Duration(i))
			if one[p[0]].Max > 0 {
				if one[p[0]].Max--; one[p[0]].Max == 0 {
					one[p[0]].MaxRunning = one[p[0]].Leased // nothing left to give
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("accounts %+v, n %d: one claim gave %v, %d claims of one %v", accounts, n, got, n, want)
		}
	}
}

func TestFairGroups(t *testing.T) {
	jobs := func(groups []domain.FairGroup, picks []int) []string {
		out := make([]string, len(picks))
		for i, p := range picks {
			out[i] = groups[p].JobID
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		groups []domain.FairGroup
		n      int
		want   []string
	}{
		{"a small job beside a big one's leases",
			[]domain.FairGroup{{JobID: "big", JobCreatedAt: t0, Leased: 3}, {JobID: "small", JobCreatedAt: t0.Add(time.Second)}}, 5,
			[]string{"small", "small", "small", "big", "small"}},
		{"equal leases: the oldest job, then the ID",
			[]domain.FairGroup{{JobID: "c", JobCreatedAt: t0.Add(time.Second)}, {JobID: "b", JobCreatedAt: t0}, {JobID: "a", JobCreatedAt: t0}}, 4,
			[]string{"a", "b", "c", "a"}},
		{"priority before leases",
			[]domain.FairGroup{{JobID: "low", Leased: 0}, {JobID: "high", Priority: 5, Leased: 9}}, 2, []string{"high", "high"}},
		{"runnable caps a group",
			[]domain.FairGroup{{JobID: "high", Priority: 5, Max: 1}, {JobID: "low"}}, 3, []string{"high", "low", "low"}},
		{"a job's groups share its count",
			[]domain.FairGroup{{JobID: "t", Priority: 1, Leased: 1, Max: 2}, {JobID: "t", Leased: 1}, {JobID: "u", Leased: 2}}, 5,
			[]string{"t", "t", "u", "t", "u"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := jobs(tc.groups, domain.FairGroups(tc.groups, tc.n, 1))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFairGroupsAsSingleClaims checks that a claim of n takes the tasks
// of an account's jobs as n claims of one in a row would.
func TestFairGroupsAsSingleClaims(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		var groups []domain.FairGroup
		leased := map[string]int{}
		seen := map[[2]int]bool{} // a group is one job's tasks of one priority
		for range 1 + r.IntN(6) {
			job, priority := r.IntN(4), r.IntN(2)
			if seen[[2]int{job, priority}] {
				continue
			}
			seen[[2]int{job, priority}] = true
			id := string(rune('a' + job))
			if _, ok := leased[id]; !ok {
				leased[id] = r.IntN(4)
			}
			groups = append(groups, domain.FairGroup{JobID: id, Priority: priority, JobCreatedAt: t0.Add(time.Duration(job%2) * time.Second),
				Leased: leased[id], Max: r.IntN(4)})
		}
		n := 1 + r.IntN(15)
		got := domain.FairGroups(slices.Clone(groups), n, 1)
		var want []int
		one := slices.Clone(groups)
		left := make([]int, len(one))
		for i, g := range one {
			left[i] = g.Max
		}
		for range n {
			var open []domain.FairGroup
			var at []int
			for i, g := range one {
				if g.Max == 0 || left[i] > 0 {
					open = append(open, g)
					at = append(at, i)
				}
			}
			p := domain.FairGroups(open, 1, 1)
			if len(p) == 0 {
				break
			}
			i := at[p[0]]
			want = append(want, i)
			left[i]--
			for j := range one {
				if one[j].JobID == one[i].JobID {
					one[j].Leased++
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("groups %+v, n %d: one claim gave %v, %d claims of one %v", groups, n, got, n, want)
		}
	}
}

// TestFairUnits: with a unit, each pick serves its account (its job) that
// many tasks at once, within its caps, and the counts go on from there.
func TestFairUnits(t *testing.T) {
	accounts := []domain.FairAccount{{Name: "a", Weight: 1}, {Name: "b", Weight: 3}, {Name: "c", MaxRunning: 2}}
	got := names(accounts, domain.FairAccounts(accounts, 12, 3))
	want := []string{"a", "a", "a", "b", "b", "b", "c", "c", "b", "b", "b", "b"}
	if !slices.Equal(got, want) {
		t.Errorf("accounts in units of 3: got %v, want %v", got, want)
	}
	groups := []domain.FairGroup{{JobID: "x"}, {JobID: "y", Leased: 1, Max: 2}}
	picks := domain.FairGroups(groups, 7, 3)
	var jobs []string
	for _, p := range picks {
		jobs = append(jobs, groups[p].JobID)
	}
	if want := []string{"x", "x", "x", "y", "y", "x", "x"}; !slices.Equal(jobs, want) {
		t.Errorf("groups in units of 3: got %v, want %v", jobs, want)
	}
}

// TestFairTurnsEven: the turns of one claim differ by a task at most, so
// that no account is the one with the short turn of every claim (with
// tasks done before the next claim, only when each was served orders
// the accounts: a short turn counted as a whole one would starve it).
func TestFairTurnsEven(t *testing.T) {
	accounts := make([]domain.FairAccount, 5)
	for i := range accounts {
		accounts[i].Name = string(rune('a' + i))
	}
	count := map[string]int{}
	for _, p := range domain.FairAccounts(accounts, 50, 12) {
		count[accounts[p].Name]++
	}
	for _, a := range accounts {
		if count[a.Name] != 10 {
			t.Errorf("a claim of 50 in turns of about 12 among 5 accounts gave %v; want 10 each", count)
			break
		}
	}
	groups := []domain.FairGroup{{JobID: "x"}, {JobID: "y"}, {JobID: "z"}}
	jobs := map[string]int{}
	for _, p := range domain.FairGroups(groups, 24, 9) {
		jobs[groups[p].JobID]++
	}
	if jobs["x"] != 8 || jobs["y"] != 8 || jobs["z"] != 8 {
		t.Errorf("a claim of 24 in turns of about 9 among 3 jobs gave %v; want 8 each", jobs)
	}
}
