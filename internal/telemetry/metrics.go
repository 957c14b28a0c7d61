package telemetry

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/store"
)

// Metrics owns a coordinator's Prometheus registry (its own, not the
// global default) and its collectors. It is the engine's Observer, the
// source of the HTTP request metrics (see Wrap) and, once Watch is called,
// reads the database's state at every scrape.
type Metrics struct {
	reg *prometheus.Registry
	log *slog.Logger

	claims       *prometheus.CounterVec
	claimSeconds *prometheus.HistogramVec
	completions  *prometheus.CounterVec
	failures     *prometheus.CounterVec
	expiries     *prometheus.CounterVec
	requests     *prometheus.HistogramVec
	deleted      *prometheus.CounterVec
	deletedBytes prometheus.Counter
	inputBytes   prometheus.Counter
}

var (
	_ engine.Observer          = (*Metrics)(nil)
	_ engine.RetentionObserver = (*Metrics)(nil)
	_ engine.InputObserver     = (*Metrics)(nil)
)

// retentionKinds are the kinds of things retention deletes, so that each
// reads 0 before the first pass deletes one.
var retentionKinds = []string{"job", "tree", "task", "log", "arg", "upload", "file"}

// New returns Metrics with the Go runtime and process collectors and the
// engine's and HTTP server's counters registered. log receives the errors
// of scrapes; nil means slog.Default().
func New(log *slog.Logger) *Metrics {
	if log == nil {
		log = slog.Default()
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		log: log,
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scimesh_task_claims_total",
			Help: "Tasks leased by this process's claims, by task kind.",
		}, []string{"kind"}),
		claimSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "scimesh_claim_duration_seconds",
			Help: "Time of one claim statement, which serves the claims that arrived together (without any long-poll wait), empty claims included, by task kind.",
			// 0.5 ms to about 2 s.
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 13),
		}, []string{"kind"}),
		completions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scimesh_task_completions_total",
			Help: "Tasks completed through this process (replayed results not counted), by task kind.",
		}, []string{"kind"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scimesh_task_failures_total",
			Help: "Failed attempts reported to this process (releases not counted), by task kind and whether the task failed for good.",
		}, []string{"kind", "final"}),
		expiries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scimesh_lease_expiries_total",
			Help: "Leases this process found expired, by task kind and whether the task failed for good (it held its last attempt).",
		}, []string{"kind", "final"}),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "scimesh_http_request_duration_seconds",
			Help: "Time to serve an HTTP request (REST, gRPC and Connect), by method, route pattern and status code.",
			// Up to the longest long-poll claim (60 s); log streams last longer.
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"method", "route", "code"}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scimesh_retention_deleted_total",
			Help: "Rows and files deleted by this process's retention passes, by kind: job, tree, task, log (lines), arg (tree task arguments), upload, file.",
		}, []string{"kind"}),
		inputBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scimesh_task_input_bytes_total",
			Help: "Bytes of chunk inputs this process served to workers (GET /tasks/{id}/input); chunks read from presigned URLs pass elsewhere.",
		}),
		deletedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scimesh_retention_deleted_bytes_total",
			Help: "Bytes of the files (uploads, orphans, temporary files left behind) removed by this process's retention passes.",
		}),
	}
	for _, k := range retentionKinds {
		m.deleted.WithLabelValues(k)
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.claims, m.claimSeconds, m.completions, m.failures, m.expiries, m.requests,
		m.deleted, m.deletedBytes, m.inputBytes,
	)
	return m
}

// Registry returns the registry the metrics are in, to register more.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format (or another
// format the scraper asks for). A figure that cannot be read, such as the
// tasks by state while the database does not answer, is left out of that
// scrape and logged; the rest is served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      log.New(slogWriter{m.log}, "", 0),
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg, // promhttp_metric_handler_errors_total
	})
}

// slogWriter turns promhttp's log lines into slog warnings.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.log.Warn("metrics scrape: " + string(trimNewline(p)))
	return len(p), nil
}

func trimNewline(p []byte) []byte {
	for len(p) > 0 && (p[len(p)-1] == '\n' || p[len(p)-1] == '\r') {
		p = p[:len(p)-1]
	}
	return p
}

// Claimed implements engine.Observer.
func (m *Metrics) Claimed(kind domain.TaskKind, n int, d time.Duration) {
	m.claims.WithLabelValues(string(kind)).Add(float64(n))
	m.claimSeconds.WithLabelValues(string(kind)).Observe(d.Seconds())
}

// Completed implements engine.Observer.
func (m *Metrics) Completed(kind domain.TaskKind, n int) {
	m.completions.WithLabelValues(string(kind)).Add(float64(n))
}

// Failed implements engine.Observer.
func (m *Metrics) Failed(kind domain.TaskKind, final bool) {
	m.failures.WithLabelValues(string(kind), strconv.FormatBool(final)).Inc()
}

// Expired implements engine.Observer.
func (m *Metrics) Expired(kind domain.TaskKind, final bool) {
	m.expiries.WithLabelValues(string(kind), strconv.FormatBool(final)).Inc()
}

// Deleted implements engine.RetentionObserver.
func (m *Metrics) Deleted(kind string, n int, bytes int64) {
	m.deleted.WithLabelValues(kind).Add(float64(n))
	m.deletedBytes.Add(float64(bytes))
}

// InputServed implements engine.InputObserver.
func (m *Metrics) InputServed(bytes int64) { m.inputBytes.Add(float64(bytes)) }

// State is what the metrics read from the engine at scrape time;
// *engine.Engine implements it.
type State interface {
	// CountTasks counts this shard's tasks by kind and state.
	CountTasks(ctx context.Context) ([]store.TaskCount, error)
	// GetOutboxStats is the size of this shard's outbox.
	GetOutboxStats(ctx context.Context) (store.OutboxStats, error)
	// CountWaiting returns how many claims of this process wait for work and
	// how many streams it holds open.
	CountWaiting() (claims, streams int)
}

// PoolReporter is implemented by stores that report their database
// connection pools (both of SciMesh's do).
type PoolReporter interface {
	// PoolStats returns a snapshot of each of the store's pools.
	PoolStats() []store.PoolStats
}

// scrapeTimeout bounds the database reads of one scrape.
const scrapeTimeout = 2 * time.Second

// Watch adds the figures read at scrape time: s's tasks by state and
// outbox, and db's connection pools when db is a PoolReporter (db may be
// nil). Call it once, before serving.
func (m *Metrics) Watch(s State, db store.Store) {
	c := &stateCollector{state: s, now: time.Now}
	if p, ok := db.(PoolReporter); ok {
		c.pools = p
	}
	m.reg.MustRegister(c)
}

// stateCollector reads the database's state at each scrape.
type stateCollector struct {
	state State
	pools PoolReporter // nil when the store does not report them
	now   func() time.Time

	// Counting tasks reads the whole tasks table: one count at a time, and
	// its figures are reused for countsFor, however often anyone scrapes.
	mu       sync.Mutex
	counts   []store.TaskCount
	countsAt time.Time
}

// countsFor is how long one count of the tasks by state is reused.
const countsFor = 10 * time.Second

var (
	descTasks = prometheus.NewDesc("scimesh_tasks",
		"Tasks of this shard by kind and state, counted at most every 10 s; every replica of a shard reports the same figures (use max, not sum).", []string{"kind", "state"}, nil)
	descOutboxPending = prometheus.NewDesc("scimesh_outbox_pending_messages",
		"Outbox messages still to deliver to other shards.", nil, nil)
	descOutboxDead = prometheus.NewDesc("scimesh_outbox_dead_messages",
		"Outbox messages given up on: refused for good by their receiver.", nil, nil)
	descOutboxAge = prometheus.NewDesc("scimesh_outbox_oldest_pending_age_seconds",
		"Age of the oldest outbox message still to deliver; 0 when none.", nil, nil)
	descWaitingClaims = prometheus.NewDesc("scimesh_waiting_claims",
		"Claims of this process waiting for work (long-polls, Worker.Poll), against --max-waiting-claims.", nil, nil)
	descOpenStreams = prometheus.NewDesc("scimesh_open_streams",
		"Log follows and dashboard live views this process holds open, against --max-streams.", nil, nil)
	descPoolMax = prometheus.NewDesc("scimesh_db_pool_max_connections",
		"Most connections the pool opens; 0 when unbounded.", []string{"pool"}, nil)
	descPoolOpen = prometheus.NewDesc("scimesh_db_pool_open_connections",
		"Database connections open, in use or idle.", []string{"pool"}, nil)
	descPoolInUse = prometheus.NewDesc("scimesh_db_pool_in_use_connections",
		"Database connections handed out.", []string{"pool"}, nil)
	descPoolIdle = prometheus.NewDesc("scimesh_db_pool_idle_connections",
		"Open database connections not in use.", []string{"pool"}, nil)
	descPoolWaits = prometheus.NewDesc("scimesh_db_pool_waits_total",
		"Times a caller found no connection free and waited for one.", []string{"pool"}, nil)
	descPoolWaitSeconds = prometheus.NewDesc("scimesh_db_pool_wait_seconds_total",
		"Time callers spent waiting for a connection.", []string{"pool"}, nil)
)

// taskKinds and taskStates are every kind and state of a row, so that a
// state without tasks reads 0 rather than vanishing. A replica is a
// ballot in its chunk's row, not a row: a chunk being voted on counts as
// one leased chunk.
var (
	taskKinds  = []domain.TaskKind{domain.KindChunk, domain.KindStitch, domain.KindTree}
	taskStates = []domain.TaskState{domain.TaskWaiting, domain.TaskPending, domain.TaskLeased,
		domain.TaskCompleted, domain.TaskFailed, domain.TaskCancelled}
)

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTasks, descOutboxPending, descOutboxDead, descOutboxAge, descWaitingClaims, descOpenStreams} {
		ch <- d
	}
	if c.pools != nil {
		for _, d := range []*prometheus.Desc{descPoolMax, descPoolOpen, descPoolInUse, descPoolIdle, descPoolWaits, descPoolWaitSeconds} {
			ch <- d
		}
	}
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	c.collectTasks(ctx, ch)
	c.collectOutbox(ctx, ch)
	claims, streams := c.state.CountWaiting()
	ch <- prometheus.MustNewConstMetric(descWaitingClaims, prometheus.GaugeValue, float64(claims))
	ch <- prometheus.MustNewConstMetric(descOpenStreams, prometheus.GaugeValue, float64(streams))
	if c.pools != nil {
		for _, p := range c.pools.PoolStats() {
			ch <- prometheus.MustNewConstMetric(descPoolMax, prometheus.GaugeValue, float64(p.Max), p.Name)
			ch <- prometheus.MustNewConstMetric(descPoolOpen, prometheus.GaugeValue, float64(p.Open), p.Name)
			ch <- prometheus.MustNewConstMetric(descPoolInUse, prometheus.GaugeValue, float64(p.InUse), p.Name)
			ch <- prometheus.MustNewConstMetric(descPoolIdle, prometheus.GaugeValue, float64(p.Idle), p.Name)
			ch <- prometheus.MustNewConstMetric(descPoolWaits, prometheus.CounterValue, float64(p.Waits), p.Name)
			ch <- prometheus.MustNewConstMetric(descPoolWaitSeconds, prometheus.CounterValue, p.WaitTime.Seconds(), p.Name)
		}
	}
}

// taskCounts returns the tasks counted by state, counting them again when
// the last count is older than countsFor.
func (c *stateCollector) taskCounts(ctx context.Context) ([]store.TaskCount, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.countsAt.IsZero() && time.Since(c.countsAt) < countsFor {
		return c.counts, nil
	}
	counts, err := c.state.CountTasks(ctx)
	if err != nil {
		return nil, err
	}
	c.counts, c.countsAt = counts, time.Now()
	return counts, nil
}

func (c *stateCollector) collectTasks(ctx context.Context, ch chan<- prometheus.Metric) {
	counts, err := c.taskCounts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descTasks, fmt.Errorf("count tasks by state: %w", err))
		return
	}
	type key struct {
		kind  domain.TaskKind
		state domain.TaskState
	}
	n := map[key]int{}
	for _, k := range taskKinds {
		for _, s := range taskStates {
			n[key{k, s}] = 0
		}
	}
	for _, tc := range counts {
		n[key{tc.Kind, tc.State}] += tc.N
	}
	for k, v := range n {
		ch <- prometheus.MustNewConstMetric(descTasks, prometheus.GaugeValue, float64(v), string(k.kind), string(k.state))
	}
}

func (c *stateCollector) collectOutbox(ctx context.Context, ch chan<- prometheus.Metric) {
	s, err := c.state.GetOutboxStats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descOutboxPending, fmt.Errorf("read outbox size: %w", err))
		return
	}
	age := 0.0
	if !s.Oldest.IsZero() {
		age = max(c.now().Sub(s.Oldest).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(descOutboxPending, prometheus.GaugeValue, float64(s.Pending))
	ch <- prometheus.MustNewConstMetric(descOutboxDead, prometheus.GaugeValue, float64(s.Dead))
	ch <- prometheus.MustNewConstMetric(descOutboxAge, prometheus.GaugeValue, age)
}
