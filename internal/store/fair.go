package store

import (
	"context"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
)

// Fair-share claims (TaskClaimParams.Fair; SPEC §9). A store answers such
// a claim with ClaimFair, which picks accounts, then jobs, then chunks:
//
//  1. TaskFairAccounts reads the accounts with runnable tasks the claim
//     could take, with their weights, max_running, when a claim last
//     served them, and their leased tasks, counted from the partial index
//     of leased tasks (no counter row, which every claim of an account
//     would update and so serialize on).
//  2. domain.FairAccounts picks which accounts the claim's n tasks go to,
//     as n single claims in a row would.
//  3. TaskFairGroups reads, for each account picked, its first runnable
//     jobs in claim order with their leased tasks, as many as it takes
//     for the account's picks to be among them, and domain.FairGroups
//     picks the jobs.
//  4. TaskClaimSlots leases, for each pick in turn, the next runnable task
//     (by chunk index) of the job picked, and records when each account
//     was served.
//
// The picks assume every job has as many runnable tasks as it is given;
// one that has fewer (a job's last chunks, or rows a concurrent claim
// holds) leaves the claim short, and ClaimFair runs the steps again for
// the rest, with counts that now include what it leased, up to
// fairRounds times. So a claim hands out its tasks as single claims in a
// row would, exactly where the job of each pick has the runnable tasks it
// is given, and otherwise close to it.

// fairRounds bounds the rounds of one fair claim.
const fairRounds = 4

// fairWalkMax bounds how many of an account's jobs a claim reads: past
// it, the jobs read are taken as all there are.
const fairWalkMax = 4096

// FairClaimer is what a store provides for ClaimFair.
type FairClaimer interface {
	// TaskFairAccounts returns the accounts (task owners) that have
	// runnable tasks of p's kind and workloads (any when none), with
	// their Weight and MaxRunning (1 and 0 for an owner without an
	// account row) and ServedAt. Leased counts the account's leased tasks
	// of every kind but stitch when more than one account is returned or
	// the account has a MaxRunning; else it may be left 0.
	TaskFairAccounts(ctx context.Context, p *TaskClaimParams) ([]domain.FairAccount, error)
	// TaskFairGroups returns, for each account of limits, the first
	// limits[account] groups of its runnable tasks of p's kind and
	// workloads in claim order (priority descending, JobCreatedAt, JobID),
	// each with its job's leased tasks (of every kind but stitch) in
	// Leased when the account has more than one group among them.
	TaskFairGroups(ctx context.Context, p *TaskClaimParams, limits map[string]int) (map[string][]domain.FairGroup, error)
	// TaskClaimSlots leases, for each slot in turn, the runnable task of
	// p's kind and workloads with the lowest ChunkIndex (then ID) of the
	// slot's group not leased for an earlier slot, as TaskClaim would:
	// the i-th task leased goes to p.Owners[i]; a slot whose group has
	// no task left is passed over. An account with a MaxRunning is given
	// no more than it leaves room for, counted in the same statement; on
	// PostgreSQL, the claims of p.Limited take a lock per account first,
	// so that concurrent claims count each other's leases. Each account
	// given a task is recorded as served at p.Now plus, in microseconds,
	// p.Served plus the place of its last slot, so that the accounts of
	// one claim are served in order.
	TaskClaimSlots(ctx context.Context, p *TaskClaimSlotsParams) ([]*domain.Task, error)
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
}

// FairSlot is one pick of a fair claim: a task of a group of an account.
type FairSlot struct {
	Account      string
	Priority     int
	JobCreatedAt time.Time
	JobID        string
}

// ClaimFair leases up to len(p.Owners) tasks in fair-share order with the
// steps c provides, the i-th in that order to p.Owners[i], and returns
// them. On an error it returns it with the tasks rounds before it leased:
// a store whose rounds commit one by one must hand those out.
func ClaimFair(ctx context.Context, c FairClaimer, p *TaskClaimParams) ([]*domain.Task, error) {
	var out []*domain.Task
	for range fairRounds {
		if len(out) == len(p.Owners) {
			break
		}
		tasks, err := claimFairRound(ctx, c, p, len(out))
		out = append(out, tasks...)
		if err != nil {
			return out, err
		}
		if len(tasks) == 0 {
			break
		}
	}
	return out, nil
}

// claimFairRound is one round of ClaimFair, after done tasks leased.
func claimFairRound(ctx context.Context, c FairClaimer, p *TaskClaimParams, done int) ([]*domain.Task, error) {
	accounts, err := c.TaskFairAccounts(ctx, p)
	if err != nil || len(accounts) == 0 {
		return nil, err
	}
	picks := domain.FairAccounts(accounts, len(p.Owners)-done)
	if len(picks) == 0 {
		return nil, nil // every account with work is at its max_running
	}
	want := map[string]int{}
	for _, i := range picks {
		want[accounts[i].Name]++
	}
	groups, err := fairGroups(ctx, c, p, want)
	if err != nil {
		return nil, err
	}
	order := make(map[string][]int, len(want)) // each account's picks of its groups
	for name, n := range want {
		order[name] = domain.FairGroups(groups[name], n)
	}
	sp := &TaskClaimSlotsParams{TaskClaimParams: *p, Served: done}
	var limited map[string]bool
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
			if limited == nil {
				limited = map[string]bool{}
			}
			limited[a.Name] = true
			sp.Limited = append(sp.Limited, a.Name)
		}
	}
	if len(sp.Slots) == 0 {
		return nil, nil // their work was taken since it was read
	}
	sp.Owners = p.Owners[done : done+len(sp.Slots)]
	return c.TaskClaimSlots(ctx, sp)
}

// fairGroups reads the groups of each account of want, enough of them
// that its first want[account] picks are among them: all of its groups of
// the highest priority, or want[account] of them with no leased task
// (every other group of that priority comes after those), reading more
// while neither is known.
func fairGroups(ctx context.Context, c FairClaimer, p *TaskClaimParams, want map[string]int) (map[string][]domain.FairGroup, error) {
	out := make(map[string][]domain.FairGroup, len(want))
	limits := make(map[string]int, len(want))
	for name, n := range want {
		limits[name] = n + 1
	}
	for len(limits) > 0 {
		got, err := c.TaskFairGroups(ctx, p, limits)
		if err != nil {
			return nil, err
		}
		next := map[string]int{}
		for name, limit := range limits {
			g := got[name]
			out[name] = g
			if len(g) < limit || limit >= fairWalkMax || enoughGroups(g, want[name]) {
				continue
			}
			next[name] = min(limit*4, fairWalkMax)
		}
		limits = next
	}
	return out, nil
}

// enoughGroups reports whether groups, an account's first groups in claim
// order, hold its first n picks: they reach past its highest priority, or
// hold n groups of that priority with no leased task.
func enoughGroups(groups []domain.FairGroup, n int) bool {
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
