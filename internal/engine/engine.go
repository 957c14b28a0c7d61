package engine

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scimesh/scimesh/internal/blob"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Config tunes an Engine. The zero value of every field but Shard has a
// sensible default.
type Config struct {
	// Shard is this node's shard name; it prefixes every ID it creates.
	Shard string
	// NodeID names this process when it leases stitch tasks; default
	// "coordinator-" plus random hex.
	NodeID string
	// Logger receives one line per notable event; default slog.Default().
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Jitter returns a number in [0, 1) for retry backoff; default math/rand.
	Jitter func() float64
	// ReapInterval is how often the reaper looks for expired leases; default 1s.
	ReapInterval time.Duration
	// StitchInterval is how often the stitcher looks for ready jobs besides
	// being woken by completions; default 1s.
	StitchInterval time.Duration
	// StitchLease is how long this process's lease on a job's stitch lasts
	// before another process may take it over; the stitcher renews it
	// every third of that while it merges. Default DefaultStitchLease. It
	// is the coordinators' own and has nothing to do with the job's
	// lease_seconds, which is the workers'.
	StitchLease time.Duration
	// Blobs holds uploads; nil on a coordinator without a blob store,
	// which then refuses uploads.
	Blobs blob.Store
	// Presign gives each claimed chunk of an upload a time-limited URL
	// straight into Blobs for its byte range (TaskView.Input), when Blobs
	// signs URLs (blob.Presigner), so that its bytes never pass through a
	// coordinator.
	Presign bool
	// PollInterval bounds how long a long-polling claim sleeps between
	// attempts when nothing wakes it (work made runnable by a backoff
	// passing or by another process); default 500ms.
	PollInterval time.Duration
	// Peers delivers messages to the other shards of trees that span
	// shards; nil on a coordinator without a topology, which then refuses
	// such trees.
	Peers Peers
	// OutboxInterval is how often the outbox loop looks for messages due
	// besides being woken by commits that record some; default 1s.
	OutboxInterval time.Duration
	// PeerGiveUp bounds how long a message may wait for a shard that does
	// not answer (ErrUnreachable): past it the outbox gives up on the
	// message and fails its tree, naming the shard. The wait counts from
	// when the message was written, or from when this engine started if
	// that is later, so a coordinator that was down itself does not give
	// up the moment it is back. Zero or less retries until the shard
	// answers.
	PeerGiveUp time.Duration
	// Observer is told of claims, completions, failures and expiries, for
	// metrics; nil tells no one.
	Observer Observer
	// MaxWaitingClaims caps the claims of this process that wait for work
	// (long-polls); beyond it a claim that would wait is refused with
	// domain.ErrBusy. Default DefaultMaxWaitingClaims.
	MaxWaitingClaims int
	// Retention is how long a final job, or a finished tree, is kept
	// before a retention pass deletes it with its tasks, logs and result;
	// 0 keeps them for ever.
	Retention time.Duration
	// UploadRetention is how long an upload that no unfinished job needs
	// is kept before a retention pass deletes it with its file; 0 keeps
	// uploads for ever.
	UploadRetention time.Duration
	// RetentionInterval is how often Run makes a retention pass (see
	// PruneExpired). Zero or less makes none: unlike the other settings, the
	// zero value keeps everything, so that nothing is deleted unless the
	// operator asked for it.
	RetentionInterval time.Duration
	// RetentionBatch is the most rows one retention transaction deletes;
	// default DefaultRetentionBatch.
	RetentionBatch int
	// MaxStreams caps the open streams of this process (log follows, the
	// dashboard's live views); beyond it one is refused with
	// domain.ErrBusy. Default DefaultMaxStreams.
	MaxStreams int
	// Scheduling is the order claims hand tasks out in; default
	// SchedulingFair.
	Scheduling Scheduling
}

// Engine runs SciMesh's operations against one store.
type Engine struct {
	store     store.Store
	cfg       Config
	log       *slog.Logger
	claimers  *claimers  // long-polling claims, woken by work
	streams   *slots     // open streams
	followers *followers // of tasks' logs, woken by appends and ends
	// jobWatchers are WaitJob's, by job ID, woken as the job's tasks
	// change; jobEnds the same, woken only when the job becomes final.
	jobWatchers *followers
	jobEnds     *followers
	stitch      *broadcast // a stitch task became pending
	outbox      *broadcast // outbox messages were committed
	// outgoing holds at most one pending notification for other
	// processes, notes what it is to say, and self names this engine in it.
	outgoing chan struct{}
	notes    workNotes
	self     string
	relays   bool // the store tells other processes of work (workSignal)
	// workEpoch moves whenever this engine learns of new runnable work,
	// its own or (relayed) another process's: fair claims rely on what
	// they read about who has work only while it stays
	// (store.TaskClaimParams.WorkEpoch).
	workEpoch atomic.Uint64
	keys      *keyCache // the principals of worker keys looked up lately
	running   runningJobs
	voting    votingCounts
	creating  creatingJobs

	sweepMu   sync.Mutex
	lastSweep time.Time

	// Group commit of the single forms (see group).
	claims *groups[claimCall, claimAnswer]
	// openClaims are the claims of untrusted workers, by workloads, and
	// trusted ones' of replicas, by account and workloads (claimOpen).
	openClaims *groups[openClaimCall, claimAnswer]
	renews     *group[renewCall, renewAnswer]
	results    *group[[]CompleteTaskParams, []ItemResult]
	treeDones  *group[treeDone, error]

	jobsMu sync.Mutex
	jobs   map[string]*domain.Job // immutable settings of recently seen jobs
	// uploadKeys are the blob names of recently seen uploads, which never
	// change; under jobsMu too.
	uploadKeys map[string]string

	seenLog    seenLog
	held       *held      // the leases handed out here, as last written
	chunkTimes chunkTimes // the median chunk times of jobs, for backups
	votes      *held      // the chunks being voted on, as last written here
	blobOwner  blobOwner
	peeks      chan struct{} // PeekJobResult's turns, maxPeeks at once
	peeked     peekCache     // PeekJobResult's merges, kept between looks

	// stitchPageHook, when set (by tests only), is called after the
	// stitcher merged each page of a job's chunk outputs.
	stitchPageHook func(jobID string, page int)
	// pageBytes is what the stitcher aims to read per page of chunk
	// outputs: stitchPageBytes, but for tests.
	pageBytes int

	// started is when the engine was made, on its clock (see PeerGiveUp).
	started time.Time
}

// New returns an Engine on s.
func New(s store.Store, cfg Config) *Engine {
	if cfg.Shard == "" {
		cfg.Shard = "s0"
	}
	if cfg.NodeID == "" {
		cfg.NodeID = "coordinator-" + randomHex(6)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Jitter == nil {
		cfg.Jitter = rand.Float64
	}
	if cfg.ReapInterval <= 0 {
		cfg.ReapInterval = time.Second
	}
	if cfg.StitchInterval <= 0 {
		cfg.StitchInterval = time.Second
	}
	if cfg.StitchLease <= 0 {
		cfg.StitchLease = DefaultStitchLease
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 500 * time.Millisecond
	}
	if cfg.OutboxInterval <= 0 {
		cfg.OutboxInterval = time.Second
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.MaxWaitingClaims <= 0 {
		cfg.MaxWaitingClaims = DefaultMaxWaitingClaims
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	e := &Engine{
		store:       s,
		cfg:         cfg,
		log:         cfg.Logger,
		claimers:    &claimers{max: cfg.MaxWaitingClaims},
		streams:     &slots{max: cfg.MaxStreams},
		followers:   newFollowers(),
		jobWatchers: newFollowers(),
		jobEnds:     newFollowers(),
		stitch:      newBroadcast(),
		outbox:      newBroadcast(),
		outgoing:    make(chan struct{}, 1),
		notes:       workNotes{due: map[workNote]int{}},
		self:        randomHex(8),
		jobs:        map[string]*domain.Job{},
		uploadKeys:  map[string]string{},
		seenLog:     seenLog{last: map[string]seenAt{}},
		held:        newHeld(heldMax, heldBytes),
		votes:       newHeld(votesMax, votesBytes),
		keys:        newKeyCache(),
		pageBytes:   stitchPageBytes,
		peeks:       make(chan struct{}, maxPeeks),
	}
	e.claims = newGroups(claimRunMax, e.claimRun)
	e.openClaims = newGroups(claimRunMax, e.openClaimRun)
	e.renews = newGroup(renewRunMax, e.renewRun)
	e.results = newGroup(resultRunMax, e.resultRun)
	e.treeDones = newGroup(resultRunMax, e.treeDoneRun)
	_, e.relays = s.(workSignal)
	e.started = e.now()
	return e
}

// Shard returns the shard name this engine creates IDs on.
func (e *Engine) Shard() string { return e.cfg.Shard }

// Ping reports whether the database answers.
func (e *Engine) Ping(ctx context.Context) error {
	if err := e.store.Ping(ctx); err != nil {
		return fmt.Errorf("%w: database does not answer: %w", domain.ErrUnavailable, err)
	}
	return nil
}

func (e *Engine) now() time.Time {
	return e.cfg.Now().UTC().Truncate(time.Microsecond)
}

// maxTxAttempts bounds the reruns of one transaction that keeps losing races.
const maxTxAttempts = 50

// tx runs fn in a transaction, rerunning it while it loses races, and
// wakes the outbox loop when the transaction committed outbox messages.
// The attempts fn ends are charged (see charge) as the transaction's last
// statement.
func (e *Engine) tx(ctx context.Context, fn func(q store.Querier) error) error {
	return e.retry(ctx, func() error {
		var (
			w *outboxWatch
			b *ballotTx
		)
		err := e.store.InTx(ctx, func(q store.Querier) error {
			w = &outboxWatch{Querier: q}
			b = newBallotTx(w, e.votes)
			m := &metered{Querier: b}
			if err := fn(m); err != nil {
				return err
			}
			return m.flush(ctx)
		})
		if err != nil {
			return err
		}
		if len(b.written) > 0 {
			e.votes.keep(e.now(), b.written...)
		}
		if w.sent {
			e.outbox.Notify()
		}
		return nil
	})
}

// retry runs fn, which writes in a transaction of its own, again while it
// loses races (store.ErrStale).
func (e *Engine) retry(ctx context.Context, fn func() error) error {
	for i := 0; ; i++ {
		err := fn()
		if !errors.Is(err, store.ErrStale) {
			return mapStoreErr(err)
		}
		if i+1 >= maxTxAttempts {
			return fmt.Errorf("%w: gave up after %d conflicting attempts; retry later: %w", domain.ErrUnavailable, maxTxAttempts, err)
		}
		// Back off a little so that racing transactions spread out.
		d := time.Duration(rand.Int64N(int64(time.Millisecond) << min(i, 6)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
}

// mapStoreErr turns the store's sentinels into the domain's.
func mapStoreErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrUnavailable) && !errors.Is(err, domain.ErrUnavailable):
		return fmt.Errorf("%w: %w", domain.ErrUnavailable, err)
	case errors.Is(err, store.ErrNotFound) && !errors.Is(err, domain.ErrNotFound):
		return fmt.Errorf("%w: %w", domain.ErrNotFound, err)
	}
	return err
}

// newLocalID returns a new ID's local part: a millisecond timestamp then
// random bits, as hex, so that IDs sort roughly by creation time.
func (e *Engine) newLocalID() string {
	return fmt.Sprintf("%012x%s", e.cfg.Now().UnixMilli(), randomHex(6))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = crand.Read(b) // never fails on supported platforms
	return hex.EncodeToString(b)
}

// broadcast wakes every waiter at once: Wait returns a channel that is
// closed by the next Notify.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBroadcast() *broadcast { return &broadcast{ch: make(chan struct{})} }

func (b *broadcast) Wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *broadcast) Notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.ch)
	b.ch = make(chan struct{})
}

// jobSettings returns the job's immutable settings, from memory when seen
// recently. Status and other mutable fields of the result may be stale.
// It reads the pool: never call it inside a transaction (jobSettingsIn).
func (e *Engine) jobSettings(ctx context.Context, id string) (*domain.Job, error) {
	return e.jobSettingsIn(ctx, e.store, id)
}

// jobSettingsIn is jobSettings reading through q, the querier of the
// transaction it runs in: an operation never holds one connection while it
// waits for another.
func (e *Engine) jobSettingsIn(ctx context.Context, q store.Querier, id string) (*domain.Job, error) {
	e.jobsMu.Lock()
	j, ok := e.jobs[id]
	e.jobsMu.Unlock()
	if ok {
		return j, nil
	}
	j, err := q.JobGet(ctx, id)
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("job %s: %w", id, err))
	}
	e.jobsMu.Lock()
	if len(e.jobs) >= maxCached {
		clear(e.jobs)
	}
	e.jobs[id] = j
	e.jobsMu.Unlock()
	return j, nil
}

// maxCached bounds the jobs' settings, and the uploads' blob names, that
// an engine keeps; past it, it starts again empty.
const maxCached = 4096

// notFound words a store.ErrNotFound for people.
func notFound(err error, format string, args ...any) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%s does not exist: %w", fmt.Sprintf(format, args...), domain.ErrNotFound)
	}
	return mapStoreErr(err)
}
