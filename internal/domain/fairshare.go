package domain

import (
	"cmp"
	"container/heap"
	"strings"
	"time"
)

// Fair share (SPEC §9): a claim serves first the account whose leased
// tasks divided by its weight is least, among the accounts with work the
// claiming worker can run, ties to the account served longest ago; within
// an account, higher priority first, then the job with the fewest leased
// tasks, then the oldest job, then chunk index. A task tree counts as a
// job: its ID is its tasks' JobID.
//
// FairAccounts and FairGroups hand out the n tasks of one claim as n
// single claims in a row would: each pick raises the leased count of the
// account (and job) it served before the next pick is made, and the
// account picked becomes the one served last. The order is exact given
// the counts passed in; the stores say how fresh those are.

// FairAccount is an account with work a claim could be given.
type FairAccount struct {
	Name   string
	Weight int // at least 1; less counts as 1
	// MaxRunning caps its tasks leased at once; 0 is no cap.
	MaxRunning int
	// Leased counts its tasks leased now.
	Leased int
	// ServedAt is when a claim last gave it a task; zero when never,
	// which is longest ago.
	ServedAt time.Time
	// Max bounds the tasks it can be given (what it has runnable, when
	// known); 0 is no bound.
	Max int
}

// FairAccounts returns the accounts n single claims in a row would serve,
// as indexes into accounts, one per task in the order given: fewer than n
// when their caps (MaxRunning, Max) run out first. With unit above 1, each
// pick serves its account about unit tasks at once (a turn; fewer when its
// cap is reached): the order of n/unit claims of unit tasks each, so that
// a large claim goes to fewer accounts, each within a turn of where single
// claims would leave it. The turns of one claim differ by one task at
// most (turnOf), so that no place in the claim's order is the short one.
func FairAccounts(accounts []FairAccount, n, unit int) []int {
	unit = max(unit, 1)
	h := make(accountHeap, 0, len(accounts))
	for i := range accounts {
		a := &accounts[i]
		s := &accountSlot{index: i, weight: max(a.Weight, 1), leased: a.Leased, served: a.ServedAt, name: a.Name, room: room(a)}
		if s.room != 0 {
			h = append(h, s)
		}
	}
	heap.Init(&h)
	out := make([]int, 0, n)
	for seq := 1; len(out) < n && len(h) > 0; seq++ {
		s := h[0]
		k := turnOf(n-len(out), unit)
		if s.room > 0 {
			k = min(k, s.room)
			s.room -= k
		}
		for range k {
			out = append(out, s.index)
		}
		s.leased += k
		s.picked = seq // served now: after every account served before this claim
		if s.room == 0 {
			heap.Pop(&h)
		} else {
			heap.Fix(&h, 0)
		}
	}
	return out
}

// turnOf is the next turn's tasks when left are still to give in turns
// of about unit: left spread evenly over the turns it takes.
func turnOf(left, unit int) int {
	turns := (left + unit - 1) / unit
	return (left + turns - 1) / turns
}

// room is how many tasks a may be given; -1 is no bound.
func room(a *FairAccount) int {
	r := -1
	if a.MaxRunning > 0 {
		r = max(a.MaxRunning-a.Leased, 0)
	}
	if a.Max > 0 && (r < 0 || a.Max < r) {
		r = a.Max
	}
	return r
}

// accountSlot is an account's place among those a claim picks from.
type accountSlot struct {
	index          int
	weight, leased int
	served         time.Time
	picked         int // the pick of this claim that served it last; 0 for none
	name           string
	room           int // tasks it may still be given; -1 for no bound
}

// before orders accounts for the next pick: least leased per weight,
// then served longest ago (those this claim served come after the
// others, in the order it served them), then name.
func (a *accountSlot) before(b *accountSlot) bool {
	if c := cmp.Compare(int64(a.leased)*int64(b.weight), int64(b.leased)*int64(a.weight)); c != 0 {
		return c < 0
	}
	if a.picked != b.picked {
		return a.picked < b.picked
	}
	if !a.served.Equal(b.served) {
		return a.served.Before(b.served)
	}
	if a.name != b.name {
		return a.name < b.name
	}
	return a.index < b.index
}

type accountHeap []*accountSlot

func (h accountHeap) Len() int           { return len(h) }
func (h accountHeap) Less(i, j int) bool { return h[i].before(h[j]) }
func (h accountHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *accountHeap) Push(x any)        { *h = append(*h, x.(*accountSlot)) }
func (h *accountHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	return s
}

// FairGroup is one job's runnable tasks of one priority, within an
// account (a job's tasks share its priority; a tree's may not).
type FairGroup struct {
	Priority     int
	JobCreatedAt time.Time // zero sorts first
	JobID        string
	// Leased counts the job's tasks leased now (all its groups).
	Leased int
	// Max bounds the tasks it can be given (what it has runnable, when
	// known); 0 is no bound.
	Max int
}

// CompareFairGroups orders an account's groups as claims do: priority
// descending, then job creation (none first), then job ID.
func CompareFairGroups(a, b FairGroup) int {
	switch {
	case a.Priority != b.Priority:
		return b.Priority - a.Priority
	case !a.JobCreatedAt.Equal(b.JobCreatedAt):
		return a.JobCreatedAt.Compare(b.JobCreatedAt)
	}
	return strings.Compare(a.JobID, b.JobID)
}

// FairGroups returns the groups n single claims in a row would take a
// task of, as indexes into groups, one per task in the order given:
// higher priority first, then the job with the fewest leased tasks (a
// task given raises its job's count), then the oldest job, then the job's
// ID. Fewer than n when the groups' Max run out first. With unit above 1,
// each pick takes about unit tasks of its group at once, as FairAccounts.
func FairGroups(groups []FairGroup, n, unit int) []int {
	unit = max(unit, 1)
	leased := make(map[string]int, len(groups))
	for _, g := range groups {
		leased[g.JobID] = max(leased[g.JobID], g.Leased)
	}
	h := make(groupHeap, 0, len(groups))
	for i := range groups {
		h = append(h, &groupSlot{index: i, g: &groups[i], leased: leased[groups[i].JobID], taken: 0})
	}
	heap.Init(&h)
	out := make([]int, 0, n)
	for len(out) < n && len(h) > 0 {
		s := h[0]
		if now := leased[s.g.JobID]; now != s.leased {
			// Another group of its job was given a task since this one's
			// place was set: counts only grow, so it moves back.
			s.leased = now
			heap.Fix(&h, 0)
			continue
		}
		k := turnOf(n-len(out), unit)
		if s.g.Max > 0 {
			k = min(k, s.g.Max-s.taken)
		}
		for range k {
			out = append(out, s.index)
		}
		s.taken += k
		leased[s.g.JobID] += k
		s.leased += k
		if s.g.Max > 0 && s.taken >= s.g.Max {
			heap.Pop(&h)
		} else {
			heap.Fix(&h, 0)
		}
	}
	return out
}

// groupSlot is a group's place among those a claim picks from; leased is
// its job's count when the place was set.
type groupSlot struct {
	index         int
	g             *FairGroup
	leased, taken int
}

func (a *groupSlot) before(b *groupSlot) bool {
	if a.g.Priority != b.g.Priority {
		return a.g.Priority > b.g.Priority
	}
	if a.leased != b.leased {
		return a.leased < b.leased
	}
	if !a.g.JobCreatedAt.Equal(b.g.JobCreatedAt) {
		return a.g.JobCreatedAt.Before(b.g.JobCreatedAt)
	}
	if a.g.JobID != b.g.JobID {
		return a.g.JobID < b.g.JobID
	}
	return a.index < b.index
}

type groupHeap []*groupSlot

func (h groupHeap) Len() int           { return len(h) }
func (h groupHeap) Less(i, j int) bool { return h[i].before(h[j]) }
func (h groupHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *groupHeap) Push(x any)        { *h = append(*h, x.(*groupSlot)) }
func (h *groupHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	return s
}
