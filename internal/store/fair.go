package store

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
)

// Fair-share claims (TaskClaimParams.Fair; SPEC §9). A store answers such
// a claim with ClaimFair, which picks accounts, then jobs, then chunks:
//
//  1. TaskFairAccounts reads the accounts with runnable tasks the claim
//     could take, with their weights, max_running and when a claim last
//     served them.
//  2. TaskFairCounts counts, afresh at every claim, the leased tasks of
//     every account and job, from the partial index of leased tasks (no
//     counter row, which every claim of an account would update and so
//     serialize on). A claim with one account with work, no max_running
//     and one job counts nothing.
//  3. domain.FairAccounts picks which accounts the claim's n tasks go to,
//     as n single claims in a row would.
//  4. TaskFairGroups reads, for each account picked, its first runnable
//     jobs in claim order, as many as it takes for the account's picks
//     to be among them, and domain.FairGroups picks the jobs.
//  5. TaskClaimSlots leases, for each pick in turn, the next runnable task
//     (by chunk index) of the job picked, and records when each account
//     was served (unless it is the only one with work: there is no tie to
//     break then).
//
// Steps 1 and 4 cost a search of an index per account, or per job, with
// work: the most of a claim among many accounts. What they read changes
// only when work is added or runs out, so a FairMemo keeps it between
// claims: a claim reads them again when TaskClaimParams.WorkEpoch moved
// (the engine moves it whenever it learns of new work, its own or another
// process's) or FairMemoFor passed (an account's jobs: fairGroupsFor); a
// job a claim finds without the tasks it was given is dropped from it at
// once. When the claims of this
// process served each account is kept there too (it is only the
// tie-break; another process's claims are seen when it is read again).
// The leased counts are read at every claim.
//
// A claim of 2·fairSpread tasks or more picks in units (fairUnit): each pick
// gives its account, and then its job, n/fairSpread tasks at once, as
// n/unit claims of unit tasks each would, so that every account and job
// ends within a unit of where single claims would leave it.
//
// The picks assume every job has as many runnable tasks as it is given;
// one that has fewer (a job's last chunks, or rows a concurrent claim
// holds) leaves the claim short, and ClaimFair runs the steps again for
// the rest, with counts that now include what it leased, up to
// fairRounds times. So a claim of fewer than 2·fairSpread tasks hands
// out its tasks as single claims in a row would, exactly where the job of
// each pick has the runnable tasks it is given and the memo is current,
// and otherwise close to it; a larger claim, in units.

// fairSpread is about the most accounts (and jobs) a claim of many tasks
// is shared between: a claim of n tasks picks in units of n/fairSpread
// tasks (fairUnit), so that it takes runs of chunks of a few jobs, whose
// writes land on a few pages, rather than one chunk of each of many jobs.
// Spread one chunk at a time over a hundred accounts, a claim of 50 cost
// SQLite ten times FIFO's writes (BenchmarkClaimAccounts). A
// claim of fewer than 2·fairSpread tasks picks one task at a time. Claims
// served together (group commit) are one claim here: among many accounts,
// a run of 20 claims of one task serves 4 of them 5 tasks each, and the
// next run others.
const fairSpread = 4

// fairUnit is the tasks each pick of a claim of n tasks gives: at most
// FairCountMax, which the runnable tasks of each job are counted up to, so
// that no pick gives a job more than it has.
func fairUnit(n int) int { return min(max(1, n/fairSpread), FairCountMax) }

// FairCountMax is how far a store counts a job's runnable tasks when it
// reads an account's jobs (TaskFairGroups): a job with fewer is given no
// more than it has, one with that many is given as many as a pick gives.
const FairCountMax = 64

// fairRounds bounds the rounds of one fair claim that lease tasks, and
// fairDryRounds those that lease none.
const (
	fairRounds    = 4
	fairDryRounds = 64
)

// The jobs of an account a claim reads: at first at least fairWalkFirst
// (or one more than it gives the account), more when those do not settle
// the picks, but never past fairWalkMax: past it, the jobs read are taken
// as all there are.
const (
	fairWalkFirst = 16
	fairWalkMax   = 4096
)

// FairMemoFor is the longest a fair claim relies on what an earlier one
// read about which accounts have work, when no new work was heard of
// (TaskClaimParams.WorkEpoch): an account's work that the engine did not
// hear of (made by a process that tells no one) is seen that late at
// worst. What it read of an account's jobs it relies on for
// fairGroupsFor, since reading them again costs more: a new job of an
// account with work already is seen that late at worst.
const (
	FairMemoFor   = 250 * time.Millisecond
	fairGroupsFor = 8 * FairMemoFor
)

// FairClaimer is what a store provides for ClaimFair.
type FairClaimer interface {
	// TaskClaim is the store's claim: with p.Fair false, the FIFO claim.
	// ClaimFair makes it when it would lease the same tasks: one account
	// with work, no max_running, one job with work.
	TaskClaim(ctx context.Context, p *TaskClaimParams) ([]*domain.Task, error)
	// TaskFairAccounts returns the accounts (task owners) that have
	// runnable tasks of p's kind and workloads (any when none), with
	// their Weight and MaxRunning (1 and 0 for an owner without an
	// account row) and ServedAt.
	TaskFairAccounts(ctx context.Context, p *TaskClaimParams) ([]domain.FairAccount, error)
	// TaskFairCounts counts the leased tasks of every kind but stitch by
	// account and by job.
	TaskFairCounts(ctx context.Context) (*FairCounts, error)
	// TaskFairGroups returns, for each account of limits, the first
	// limits[account] groups of its runnable tasks of p's kind and
	// workloads in claim order (priority descending, JobCreatedAt,
	// JobID), Leased left 0, with Max the group's runnable tasks counted
	// up to FairCountMax.
	TaskFairGroups(ctx context.Context, p *TaskClaimParams, limits map[string]int) (map[string][]domain.FairGroup, error)
	// TaskClaimSlots leases, for each slot in turn, the runnable task of
	// p's kind and workloads with the lowest ChunkIndex of the slot's
	// group not leased for an earlier slot, as TaskClaim would: the i-th
	// task leased goes to p.Owners[i]; a slot whose group has no task left
	// is passed over. An account with a MaxRunning is given no more than
	// it leaves room for, counted in the same statement; on PostgreSQL,
	// the claims of p.Limited take a lock per account first, so that
	// concurrent claims count each other's leases. With p.Stamp, each
	// account given a task is recorded as served at servedAt(p, its last
	// slot given a task).
	TaskClaimSlots(ctx context.Context, p *TaskClaimSlotsParams) ([]*domain.Task, error)
}

// FairCounts are what a fair claim counts afresh.
type FairCounts struct {
	Leased    map[string]int  // by account
	JobLeased map[FairJob]int // by account and job
}

// FairJob is a job (or a tree) of an account.
type FairJob struct {
	Account, JobID string
}

// TaskClaimSlotsParams says which tasks a fair claim leases.
type TaskClaimSlotsParams struct {
	TaskClaimParams
	// Slots are the picks, one per task wanted, in claim order.
	Slots []FairSlot
	// Limited are the accounts of Slots that have a MaxRunning.
	Limited []string
	// Served is how many tasks the claim leased before these.
	Served int
	// Stamp records when the accounts were served.
	Stamp bool
}

// servedAt is when slot i of p serves its account: p.Now plus, in
// microseconds, p.Served + i, so that the accounts of one claim are
// served in order.
func servedAt(p *TaskClaimSlotsParams, i int) time.Time {
	return p.Now.Add(time.Duration(p.Served+i) * time.Microsecond)
}

// FairSlot is one pick of a fair claim: a task of a group of an account.
type FairSlot struct {
	Account      string
	Priority     int
	JobCreatedAt time.Time
	JobID        string
}

// ClaimFair leases up to len(p.Owners) tasks in fair-share order with the
// steps c provides, remembering in memo (nil: nothing) what it may use
// again, the i-th in that order to p.Owners[i], and returns them. On an
// error it returns it with the tasks rounds before it leased: a store
// whose rounds commit one by one must hand those out.
func ClaimFair(ctx context.Context, c FairClaimer, memo *FairMemo, p *TaskClaimParams) ([]*domain.Task, error) {
	var out []*domain.Task
	// A round that leased nothing but forgot jobs the memo had wrong
	// does not count: each forgets one at least, so they end.
	for rounds, dry := 0, 0; rounds < fairRounds && dry < fairDryRounds && len(out) < len(p.Owners); {
		tasks, learnt, err := claimFairRound(ctx, c, memo, p, len(out))
		out = append(out, tasks...)
		if err != nil {
			return out, err
		}
		switch {
		case len(tasks) > 0:
			rounds++
		case learnt:
			dry++
		default:
			return out, nil
		}
	}
	return out, nil
}

// claimFairRound is one round of ClaimFair, after done tasks leased. It
// returns what it leased, and whether it found jobs without the tasks the
// memo said they had: a round after it may then find others.
func claimFairRound(ctx context.Context, c FairClaimer, memo *FairMemo, p *TaskClaimParams, done int) (tasks []*domain.Task, learnt bool, err error) {
	v, err := memo.view(ctx, c, p)
	if err != nil {
		return nil, false, err
	}
	accounts := v.accountList()
	if len(accounts) == 0 {
		return nil, false, nil
	}
	if alone := v.onlyJob(accounts, p.Now); alone != nil {
		// One account with work, uncapped, with one job with work: the
		// fair order is the FIFO order, and the FIFO claim is the cheaper.
		fifo := *p
		fifo.Fair, fifo.Owners = false, p.Owners[done:]
		if tasks, err = c.TaskClaim(ctx, &fifo); err != nil {
			return nil, false, err
		}
		if len(tasks) < len(fifo.Owners) {
			v.forget(FairSlot{Account: accounts[0].Name, Priority: alone.Priority, JobCreatedAt: alone.JobCreatedAt, JobID: alone.JobID})
			learnt = true
		}
		return tasks, learnt, nil
	}
	var counts *FairCounts
	count := func() error {
		if counts == nil {
			var err error
			counts, err = c.TaskFairCounts(ctx)
			return err
		}
		return nil
	}
	capped := slices.ContainsFunc(accounts, func(a domain.FairAccount) bool { return a.MaxRunning > 0 })
	if len(accounts) > 1 || capped {
		if err := count(); err != nil {
			return nil, false, err
		}
		for i := range accounts {
			accounts[i].Leased = counts.Leased[accounts[i].Name]
		}
	}
	unit := fairUnit(len(p.Owners) - done)
	picks := domain.FairAccounts(accounts, len(p.Owners)-done, unit)
	if len(picks) == 0 {
		return nil, false, nil // every account with work is at its max_running
	}
	want := map[string]int{}
	for _, i := range picks {
		want[accounts[i].Name]++
	}
	groups, err := v.groupsOf(ctx, c, p, want, count, &counts)
	if err != nil {
		return nil, false, err
	}
	order := make(map[string][]int, len(want)) // each account's picks of its groups
	for name, n := range want {
		order[name] = domain.FairGroups(groups[name], n, unit)
	}
	sp := &TaskClaimSlotsParams{TaskClaimParams: *p, Served: done, Stamp: len(accounts) > 1}
	limited := map[string]bool{}
	for _, i := range picks {
		a := &accounts[i]
		o := order[a.Name]
		if len(o) == 0 {
			continue // its groups ran out
		}
		g := groups[a.Name][o[0]]
		order[a.Name] = o[1:]
		sp.Slots = append(sp.Slots, FairSlot{Account: a.Name, Priority: g.Priority, JobCreatedAt: g.JobCreatedAt, JobID: g.JobID})
		if a.MaxRunning > 0 && !limited[a.Name] {
			limited[a.Name] = true
			sp.Limited = append(sp.Limited, a.Name)
		}
	}
	if len(sp.Slots) == 0 {
		return nil, false, nil
	}
	sp.Owners = p.Owners[done : done+len(sp.Slots)]
	if tasks, err = c.TaskClaimSlots(ctx, sp); err != nil {
		return nil, false, err
	}
	// A group that gave fewer tasks than it had slots has none left (or
	// none that a concurrent claim does not hold): the memo forgets it.
	// An account with a max_running may have been held back instead.
	// What each group gave comes off what the memo counted of it.
	short, took := map[FairSlot]int{}, map[FairSlot]int{}
	for _, s := range sp.Slots {
		if !limited[s.Account] {
			short[slotGroup(s)]++
		}
	}
	for _, t := range tasks {
		g := FairSlot{Account: t.Owner, Priority: t.Priority, JobCreatedAt: t.JobCreatedAt, JobID: t.JobID}
		short[g]--
		took[g]++
	}
	v.took(took)
	for g, n := range short {
		if n > 0 {
			v.forget(g)
			learnt = true
		}
	}
	if sp.Stamp {
		got := map[string]bool{}
		for _, t := range tasks {
			got[t.Owner] = true
		}
		served := map[string]time.Time{}
		for i, s := range sp.Slots {
			if got[s.Account] {
				served[s.Account] = servedAt(sp, i)
			}
		}
		v.served(served)
	}
	return tasks, learnt, nil
}

// slotGroup is s as its group's key: its time as a claimed task's reads.
func slotGroup(s FairSlot) FairSlot {
	if !s.JobCreatedAt.IsZero() {
		s.JobCreatedAt = s.JobCreatedAt.UTC()
	}
	return s
}

// FairMemo is what a store's fair claims remember between them (see
// ClaimFair): per kind and workloads claimed, the accounts with runnable
// work and the first groups of each. Make it with NewFairMemo; it is safe
// for concurrent use.
type FairMemo struct {
	mu    sync.Mutex
	views map[string]*fairView
}

// NewFairMemo returns an empty FairMemo.
func NewFairMemo() *FairMemo { return &FairMemo{views: map[string]*fairView{}} }

// fairView is what the claims of one kind and workloads read.
type fairView struct {
	memo     *FairMemo // whose mu guards the fields below
	epoch    uint64
	read     time.Time // the Now of the claim that read it
	accounts []domain.FairAccount
	groups   map[string]*knownGroups // by account: nil until read
}

// knownGroups are an account's first groups in claim order, as read.
type knownGroups struct {
	list []domain.FairGroup
	all  bool      // every group it had when read
	read time.Time // the Now of the claim that read them
}

// view returns what p's claim may use: the memo's when current, else
// read now (and kept, for a memo).
func (m *FairMemo) view(ctx context.Context, c FairClaimer, p *TaskClaimParams) (*fairView, error) {
	key := string(p.Kinds[0]) + "\x00" + strings.Join(p.Workloads, "\x00")
	var old *fairView
	if m != nil {
		m.mu.Lock()
		old = m.views[key]
		m.mu.Unlock()
		if old != nil && old.epoch == p.WorkEpoch && !p.Now.Before(old.read) && p.Now.Sub(old.read) < FairMemoFor {
			return old, nil
		}
	}
	accounts, err := c.TaskFairAccounts(ctx, p)
	if err != nil {
		return nil, err
	}
	v := &fairView{memo: m, epoch: p.WorkEpoch, read: p.Now, accounts: accounts, groups: map[string]*knownGroups{}}
	if m == nil {
		return v, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old != nil && old.epoch == p.WorkEpoch {
		// No new work heard of: the jobs read of the accounts still with
		// work stand, for as long as they may.
		for _, a := range accounts {
			if k := old.groups[a.Name]; k != nil && !p.Now.Before(k.read) && p.Now.Sub(k.read) < fairGroupsFor {
				v.groups[a.Name] = k
			}
		}
	}
	m.views[key] = v
	return v, nil
}

func (v *fairView) lock() {
	if v.memo != nil {
		v.memo.mu.Lock()
	}
}

func (v *fairView) unlock() {
	if v.memo != nil {
		v.memo.mu.Unlock()
	}
}

// accountList is a copy of the accounts, Leased zero.
func (v *fairView) accountList() []domain.FairAccount {
	v.lock()
	defer v.unlock()
	return slices.Clone(v.accounts)
}

// served records when this process's claims served accounts.
func (v *fairView) served(at map[string]time.Time) {
	v.lock()
	defer v.unlock()
	accounts := slices.Clone(v.accounts)
	for i := range accounts {
		if t, ok := at[accounts[i].Name]; ok && t.After(accounts[i].ServedAt) {
			accounts[i].ServedAt = t
		}
	}
	v.accounts = accounts
}

// took takes what each group gave off what the view counted of it, and
// forgets a group left with none.
func (v *fairView) took(n map[FairSlot]int) {
	var gone []FairSlot
	v.lock()
	for g, k := range n {
		known := v.groups[g.Account]
		if known == nil {
			continue
		}
		i := slices.IndexFunc(known.list, func(f domain.FairGroup) bool { return f.JobID == g.JobID && f.Priority == g.Priority })
		if i < 0 || known.list[i].Max == 0 {
			continue
		}
		list := slices.Clone(known.list)
		if list[i].Max -= k; list[i].Max <= 0 {
			gone = append(gone, g)
			list[i].Max = 1 // forget drops it
		}
		v.groups[g.Account] = &knownGroups{list: list, all: known.all, read: known.read}
	}
	v.unlock()
	for _, g := range gone {
		v.forget(g)
	}
}

// onlyJob returns the one group with work of the one account of
// accounts, when that account has no max_running and the view knows it
// has no other (read within fairGroupsFor of now); else nil.
func (v *fairView) onlyJob(accounts []domain.FairAccount, now time.Time) *domain.FairGroup {
	if len(accounts) != 1 || accounts[0].MaxRunning > 0 {
		return nil
	}
	v.lock()
	defer v.unlock()
	k := v.groups[accounts[0].Name]
	if k == nil || !k.all || len(k.list) != 1 || now.Before(k.read) || now.Sub(k.read) >= fairGroupsFor {
		return nil
	}
	g := k.list[0]
	return &g
}

// forget drops group g, which has no runnable task left, and its account
// once it has no group left.
func (v *fairView) forget(g FairSlot) {
	v.lock()
	defer v.unlock()
	known := v.groups[g.Account]
	if known == nil {
		return
	}
	list := slices.DeleteFunc(slices.Clone(known.list), func(k domain.FairGroup) bool {
		return k.JobID == g.JobID && k.Priority == g.Priority
	})
	if len(list) > 0 || !known.all {
		v.groups[g.Account] = &knownGroups{list: list, all: known.all, read: known.read}
		if len(list) == 0 {
			v.groups[g.Account] = nil // to be read again
		}
		return
	}
	delete(v.groups, g.Account)
	v.accounts = slices.DeleteFunc(slices.Clone(v.accounts), func(a domain.FairAccount) bool { return a.Name == g.Account })
}

// groupsOf returns the groups of each account of want, enough of them
// that its first want[account] picks are among them, with their jobs'
// leased tasks when it has more than one: all of its groups of the
// highest priority, or want[account] of them with no leased task (every
// other group of that priority comes after those). What the view holds
// serves when it is enough; else more are read, and kept.
func (v *fairView) groupsOf(ctx context.Context, c FairClaimer, p *TaskClaimParams, want map[string]int,
	count func() error, counts **FairCounts) (map[string][]domain.FairGroup, error) {
	out := make(map[string][]domain.FairGroup, len(want))
	limits := map[string]int{}
	leased := func(name string, list []domain.FairGroup) ([]domain.FairGroup, error) {
		if len(list) < 2 {
			return list, nil
		}
		if err := count(); err != nil {
			return nil, err
		}
		list = slices.Clone(list)
		for i := range list {
			list[i].Leased = (*counts).JobLeased[FairJob{name, list[i].JobID}]
		}
		return list, nil
	}
	v.lock()
	known := make(map[string]*knownGroups, len(want))
	for name := range want {
		if k := v.groups[name]; k != nil && !p.Now.Before(k.read) && p.Now.Sub(k.read) < fairGroupsFor {
			known[name] = k
		}
	}
	v.unlock()
	for name, n := range want {
		k := known[name]
		if k == nil {
			limits[name] = max(fairWalkFirst, n+1)
			continue
		}
		list, err := leased(name, k.list)
		if err != nil {
			return nil, err
		}
		if k.all || enoughGroups(list, n) || len(list) >= fairWalkMax {
			out[name] = list
			continue
		}
		limits[name] = min(max(len(list)*4, n+1), fairWalkMax)
	}
	for len(limits) > 0 {
		got, err := c.TaskFairGroups(ctx, p, limits)
		if err != nil {
			return nil, err
		}
		for _, groups := range got {
			for i := range groups {
				if groups[i].Max >= FairCountMax {
					groups[i].Max = 0 // as many as any pick gives
				}
			}
		}
		next := map[string]int{}
		for name, limit := range limits {
			read := &knownGroups{list: got[name], all: len(got[name]) < limit, read: p.Now}
			v.lock()
			v.groups[name] = read
			v.unlock()
			list, err := leased(name, read.list)
			if err != nil {
				return nil, err
			}
			out[name] = list
			if !read.all && limit < fairWalkMax && !enoughGroups(list, want[name]) {
				next[name] = min(limit*4, fairWalkMax)
			}
		}
		limits = next
	}
	return out, nil
}

// enoughGroups reports whether groups, an account's first groups in claim
// order, hold its first n picks: they reach past its highest priority, or
// hold n groups of that priority with no leased task.
func enoughGroups(groups []domain.FairGroup, n int) bool {
	if len(groups) == 0 {
		return false
	}
	top := groups[0].Priority
	idle := 0
	for _, g := range groups {
		if g.Priority != top {
			return true
		}
		if g.Leased == 0 {
			idle++
		}
	}
	return idle >= n
}
