package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Worker bookkeeping: which workers called lately, the workloads they
// announce, what they hold and how many tasks they completed, for the
// dashboard and GET /workloads. Recording a call (seen) is on a worker's
// path, at most every seenEvery per worker and process, and at once when
// a worker announces other workloads than this process last recorded;
// the tasks a worker completed are counted in the transaction that
// records their results (workerDid). PruneWorkers forgets those gone.

// seenEvery bounds how often one process records that a worker called.
const seenEvery = 5 * time.Second

// seenLog remembers when this process last recorded each worker.
type seenLog struct {
	mu   sync.Mutex
	last map[string]seenAt
}

type seenAt struct {
	call, beat time.Time
	workloads  string // as last announced, joined; with announced
	announced  bool
}

// workerCall is a call seen records: a claim or poll; with heartbeat, a
// lease renewal; with announced, a chunk claim, which names the
// workloads the worker runs (sorted; none when it takes any).
type workerCall struct {
	heartbeat bool
	announced bool
	workloads []string
	versions  map[string]string // of workloads, those the worker announced
}

// seen records that worker made call c, unless this process did so
// recently and c announces nothing new. A failure to record is logged and
// otherwise ignored: it costs the dashboard a little freshness.
func (e *Engine) seen(ctx context.Context, worker string, c workerCall) {
	now := e.now()
	joined := store.JoinWorkloads(c.workloads, c.versions)
	e.seenLog.mu.Lock()
	s := e.seenLog.last[worker]
	due := now.Sub(s.call) >= seenEvery || (c.heartbeat && now.Sub(s.beat) >= seenEvery) ||
		(c.announced && (!s.announced || s.workloads != joined))
	if due {
		if len(e.seenLog.last) >= 10_000 {
			clear(e.seenLog.last)
		}
		s.call = now
		if c.heartbeat {
			s.beat = now
		}
		if c.announced {
			s.announced, s.workloads = true, joined
		}
		e.seenLog.last[worker] = s
	}
	e.seenLog.mu.Unlock()
	if !due {
		return
	}
	err := e.store.WorkerUpsert(ctx, &store.WorkerUpsertParams{ID: worker, Now: now, Heartbeat: c.heartbeat,
		Announced: c.announced, Workloads: c.workloads, Versions: c.versions})
	if err != nil && ctx.Err() == nil {
		e.log.WarnContext(ctx, "recording a worker's call failed", "worker_id", worker, "error", err)
	}
}

// workerDid counts, in the transaction of q (a querier tx handed out),
// that worker completed a task at now. The counts are added to the
// workers' rows as the transaction's last statement (metered.flush).
func workerDid(q store.Querier, worker string, now time.Time) {
	m, ok := q.(*metered)
	if !ok {
		panic("engine: a task completed outside Engine.tx, so its worker's count cannot be kept")
	}
	if m.done == nil {
		m.done = map[string]int64{}
	}
	m.done[worker]++
	m.doneAt = now
}

// WorkersWindow is how recently a worker must have called to count as
// connected: the workers page lists those workers, and GET /workloads the
// workloads they announce.
const WorkersWindow = 10 * time.Minute

// ListWorkersParams selects a page of workers.
type ListWorkersParams struct {
	Within time.Duration // seen within the last; 0 for every worker kept (workersKept)
	Limit  int           // 1-1000; 0 means 50
	Cursor string        // from a previous page's next cursor
	Tasks  bool          // with the tasks each holds
}

// WorkerView is a worker, the key it calls with and, when asked for, the
// tasks it holds leases on. Its store.Worker's ID is its lease owner
// (domain.Principal.LeaseOwner).
type WorkerView struct {
	*store.Worker
	Name    string // the worker's own ID, without its key's prefix
	Account string // its key's account; "" for the pool
	Key     string // its key's name; "" for the pool
	// Trusted: the pool's workers are; a key's are when the key is
	// trusted now, and not once it is revoked.
	Trusted bool
	Tasks   []*domain.Task // leased, soonest expiry first; those the caller may see
}

// maxLeasedShown bounds the leases ListWorkers reads.
const maxLeasedShown = 2000

// ListWorkers returns a page of the workers seen within p.Within, most
// recently seen first (then by ID), and the cursor of the next page (""
// at the end). An admin sees every worker, the pool's included; any other
// account the workers of its own keys alone. With p.Tasks, each comes
// with the tasks it holds now (of the first maxLeasedShown leases) that
// the caller may see.
func (e *Engine) ListWorkers(ctx context.Context, p ListWorkersParams) ([]*WorkerView, string, error) {
	limit, err := pageLimit(p.Limit)
	if err != nil {
		return nil, "", err
	}
	wp := &store.WorkerPageParams{Limit: limit + 1}
	if p.Within > 0 {
		wp.Since = e.now().Add(-p.Within)
	}
	c := domain.CallerOf(ctx)
	if !c.Admin {
		wp.Prefix = domain.AccountLeasePrefix(c.Account)
	}
	if p.Cursor != "" {
		at, err := decodeJobCursor(p.Cursor) // a worker's cursor has a job's form: a time and an ID
		if err != nil {
			return nil, "", err
		}
		wp.After = &store.WorkerCursor{LastSeen: at.CreatedAt, ID: at.ID}
	}
	ws, err := e.store.WorkerPage(ctx, wp)
	if err != nil {
		return nil, "", mapStoreErr(fmt.Errorf("list workers: %w", err))
	}
	next := ""
	if len(ws) > limit {
		ws = ws[:limit]
		last := ws[limit-1]
		next = encodeCursor(strconv.FormatInt(last.LastSeen.UnixMicro(), 10) + "|" + last.ID)
	}
	out := make([]*WorkerView, len(ws))
	for i, w := range ws {
		account, key, name := domain.SplitLeaseOwner(w.ID)
		out[i] = &WorkerView{Worker: w, Name: name, Account: account, Key: key, Trusted: key == ""}
	}
	if err := e.workerTrust(ctx, out); err != nil {
		return nil, "", err
	}
	if p.Tasks {
		if err := e.workerTasks(ctx, out); err != nil {
			return nil, "", err
		}
	}
	return out, next, nil
}

// workerTrust sets the trust of the workers of keys among ws from their
// keys as they are now, in one read: a revoked key's workers are not
// trusted.
func (e *Engine) workerTrust(ctx context.Context, ws []*WorkerView) error {
	accounts := map[string]bool{}
	for _, w := range ws {
		if w.Key != "" {
			accounts[w.Account] = true
		}
	}
	if len(accounts) == 0 {
		return nil
	}
	account := "" // every account's keys, when the workers are of several
	if len(accounts) == 1 {
		for a := range accounts {
			account = a
		}
	}
	keys, err := e.store.WorkerKeyList(ctx, account)
	if err != nil {
		return mapStoreErr(fmt.Errorf("list worker keys: %w", err))
	}
	trusted := make(map[string]bool, len(keys))
	for _, k := range keys {
		trusted[workerKeyTarget(k.Account, k.Name)] = k.Trusted
	}
	for _, w := range ws {
		if w.Key != "" {
			w.Trusted = trusted[workerKeyTarget(w.Account, w.Key)]
		}
	}
	return nil
}

// workerTasks gives each of ws the tasks it holds that the caller may
// see, of the first maxLeasedShown leases.
func (e *Engine) workerTasks(ctx context.Context, ws []*WorkerView) error {
	// Every lease expires before the end of time: this lists them all.
	leased, err := e.store.TaskListExpired(ctx, &store.TaskListExpiredParams{Now: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), Limit: maxLeasedShown})
	if err != nil {
		return mapStoreErr(fmt.Errorf("list leases: %w", err))
	}
	c := domain.CallerOf(ctx)
	byOwner := map[string][]*domain.Task{}
	for _, t := range leased {
		if c.Admin || t.Owner == c.Account {
			byOwner[t.LeaseOwner] = append(byOwner[t.LeaseOwner], t)
		}
	}
	for _, w := range ws {
		w.Tasks = byOwner[w.ID]
	}
	return nil
}

// workersKept is how long a worker that stopped calling stays listed.
const workersKept = 7 * 24 * time.Hour

// PruneWorkers forgets the workers not seen for workersKept and returns
// how many it forgot.
func (e *Engine) PruneWorkers(ctx context.Context) (int, error) {
	n, err := e.store.WorkerDelete(ctx, e.now().Add(-workersKept))
	return n, mapStoreErr(err)
}

// maxWorkersRead bounds the workers ListWorkloads reads.
const maxWorkersRead = 10_000

// WorkloadView is a workload that connected workers announce.
type WorkloadView struct {
	Name     string
	Workers  int       // connected workers that announce it
	LastSeen time.Time // the latest call of one of them
	Versions []string  // the versions those workers announce for it, sorted; nil when none does
}

// ListWorkloads returns the workloads that the workers seen within
// WorkersWindow announce (those of the maxWorkersRead seen last), by
// name. A worker that takes any workload announces none. Workloads are
// no account's: every caller sees them all.
func (e *Engine) ListWorkloads(ctx context.Context) ([]*WorkloadView, error) {
	ws, err := e.store.WorkerList(ctx, &store.WorkerListParams{Since: e.now().Add(-WorkersWindow), Limit: maxWorkersRead})
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("list workloads: %w", err))
	}
	byName := map[string]*WorkloadView{}
	for _, w := range ws {
		for _, name := range w.Workloads {
			v := byName[name]
			if v == nil {
				v = &WorkloadView{Name: name}
				byName[name] = v
			}
			v.Workers++
			if w.LastSeen.After(v.LastSeen) {
				v.LastSeen = w.LastSeen
			}
			if ver := w.Versions[name]; ver != "" && !slices.Contains(v.Versions, ver) {
				v.Versions = append(v.Versions, ver)
			}
		}
	}
	out := slices.Collect(maps.Values(byName))
	for _, v := range out {
		slices.Sort(v.Versions)
	}
	slices.SortFunc(out, func(a, b *WorkloadView) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
