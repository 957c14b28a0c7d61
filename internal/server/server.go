// Package server assembles a SciMesh coordinator, as etcd's embed does
// etcd: from a Config it opens the store and the data directory, builds
// the engine with its metrics and its peers, mounts every transport (REST,
// the scimesh.v1 RPC services, the dashboard, /metrics) on one port behind
// the authentication gate, and runs the engine's background loops beside
// the listener. `scimesh serve`, `scimesh demo` and `scimesh-bench` all
// build their coordinator here, so there is one way to build one.
//
// It does not read flags, the environment or .env: the command turns those
// into a Config, and checks what only an operator's settings can get wrong
// (a listener beyond loopback without tokens, say).
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/blob"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/httpapi"
	"github.com/scimesh/scimesh/internal/rpc"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/storeopen"
	"github.com/scimesh/scimesh/internal/telemetry"
	"github.com/scimesh/scimesh/internal/topology"
	"github.com/scimesh/scimesh/internal/ui"
)

// Config is everything a coordinator needs. Zero fields take the
// engine's and the API's defaults unless they say otherwise.
type Config struct {
	// Addr is the listen address, host:port; port 0 takes a free one,
	// which Addr reports.
	Addr string
	// Shard is this coordinator's shard name; empty means s0.
	Shard string
	// Topology says where the other shards' coordinators are; nil or
	// empty: a single shard.
	Topology *topology.Topology
	// TLSCert and TLSKey are the PEM files of the certificate the server
	// presents (followed by its intermediates) and of its private key:
	// with them it serves HTTPS, and gRPC and Connect over HTTP/2 by
	// ALPN, on Addr; without them plain HTTP and h2c. Both or neither.
	TLSCert, TLSKey string
	// Tokens are the three roles' tokens; without the client and worker
	// tokens the server answers only requests addressed to a loopback
	// host (no DNS rebinding).
	Tokens auth.Tokens

	// DB is the database URL, sqlite:PATH or postgres://… (storeopen.Open).
	DB string
	// Migrate applies PostgreSQL's pending migrations before serving.
	Migrate bool
	// WaitForDatabase, when a PostgreSQL database does not answer at
	// start, serves anyway: /health answers, the API says 503 until the
	// database answers, and the store is opened (migrated, checked) then,
	// tried again with backoff (see waiting.go). Without it New fails. A
	// SQLite file that cannot be opened fails New either way.
	WaitForDatabase bool
	// DBMaxConns is the PostgreSQL pool's size; 0 means the URL's
	// pool_max_conns, else 16.
	DBMaxConns int
	// DataDir is where uploads live when Blobs is empty; both empty
	// means none, and uploads are refused.
	DataDir string
	// Blobs is the blob store's URL (s3://…, blob.Open); empty keeps
	// uploads in files under DataDir.
	Blobs string
	// Presign hands workers a time-limited URL straight into the blob
	// store for a chunk's bytes instead of this coordinator's
	// /tasks/{id}/input; it needs a store that signs URLs (s3://…).
	Presign bool

	// Retention is how long final jobs and finished trees are kept, and
	// UploadRetention unused uploads; 0 keeps them. RetentionInterval is
	// how often the retention loop looks; 0 runs no retention loop.
	Retention, UploadRetention, RetentionInterval time.Duration
	// PeerGiveUp is how long a message may wait for a shard that does not
	// answer before its tree is failed (engine.Config.PeerGiveUp); 0 waits
	// for as long as it takes.
	PeerGiveUp time.Duration
	// StitchLease is how long a coordinator's lease on a job's stitch
	// lasts (engine.Config.StitchLease); 0 means the engine's default.
	StitchLease time.Duration
	// InsecurePeers allows the peer token over plain HTTP to hosts that
	// are not loopback.
	InsecurePeers bool
	// MaxUploadBytes bounds one upload; 0 means httpapi's default.
	MaxUploadBytes int64
	// MaxWaitingClaims and MaxStreams cap the long-polling claims and the
	// open streams of the process; 0 means the engine's defaults.
	MaxWaitingClaims, MaxStreams int
	// Scheduling is the order claims hand out tasks in; empty means
	// engine.SchedulingFair.
	Scheduling engine.Scheduling

	// BodyGrace and BodyRate, when set, replace the gate's bounds on a
	// body that trickles in (auth.Gate); tests shorten them.
	BodyGrace time.Duration
	BodyRate  int64
	// Now, ReapInterval and StitchInterval, when set, replace the
	// engine's clock and the periods of its reaper and stitcher; tests
	// set them.
	Now                          func() time.Time
	ReapInterval, StitchInterval time.Duration

	// Logger receives the server's lines, one per request among them;
	// nil means slog.Default(). Wrap its handler in
	// telemetry.NewLogHandler for the lines to carry request IDs.
	Logger *slog.Logger
}

// Server is a coordinator built from a Config: its store is open (or,
// with WaitForDatabase, about to be) and its listener bound, and Run
// serves. Make it with New.
type Server struct {
	cfg     Config
	log     *slog.Logger
	blobs   blob.Store // nil without one
	topo    *topology.Topology
	gate    *auth.Gate
	metrics *telemetry.Metrics
	tls     *tls.Config // nil: plain HTTP
	ln      net.Listener
	// handler is what the listener serves: the API, or until the
	// database answers the waiting handler.
	handler atomic.Pointer[http.Handler]

	// store and engine are nil until the database answers; once set
	// they stay. down is why it did not answer New.
	store  store.Store
	engine *engine.Engine
	down   error

	running   bool // Run was called
	closeOnce sync.Once
	closeErr  error
}

// New opens cfg's blob store and database, builds the engine and the
// transports, and binds the listener, so that Addr is known and
// connections queue from the moment it returns. Run serves them; a Server
// that is not run must be closed. With cfg.WaitForDatabase, a PostgreSQL
// database that does not answer leaves the store to Run.
func New(ctx context.Context, cfg Config) (_ *Server, err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{cfg: cfg, log: log, topo: cfg.Topology, metrics: telemetry.New(log)}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.tls, err = loadTLS(cfg.TLSCert, cfg.TLSKey); err != nil {
		return nil, err
	}
	if cfg.DataDir != "" || cfg.Blobs != "" {
		if s.blobs, err = storeopen.Blobs(ctx, cfg.Blobs, cfg.DataDir); err != nil {
			return nil, err
		}
	}
	if _, ok := s.blobs.(blob.Presigner); cfg.Presign && !ok {
		return nil, errors.New("--presign needs a blob store that signs URLs: give --blobs s3://BUCKET?endpoint=…; files under the data directory are only served by the coordinator")
	}
	if s.topo == nil {
		s.topo = &topology.Topology{}
	}
	if u, _ := s.topo.URL(cfg.Shard); s.topo.Open() && cfg.Tokens.Peer != "" && !cfg.InsecurePeers && topology.PlainRemote(u) {
		log.Warn("the topology's pattern is plain http://: messages to shards that are not on loopback will be refused, failing their trees; "+
			"use an https:// pattern, or --insecure-peers on a network you trust", "topology", s.topo.String())
	}
	if short := cfg.Tokens.Short(); len(short) > 0 {
		log.Warn("weak tokens: use at least 16 random bytes for each (e.g. openssl rand -hex 32)", "tokens", strings.Join(short, ","))
	}
	s.gate = auth.NewGate(cfg.Tokens)
	if cfg.BodyGrace > 0 {
		s.gate.BodyGrace, s.gate.BodyRate = cfg.BodyGrace, cfg.BodyRate
	}

	st, err := s.openStore(ctx)
	switch {
	case err == nil:
		if err = s.serveStore(st); err != nil {
			st.Close()
			return nil, err
		}
	case cfg.WaitForDatabase && storeopen.IsPostgres(cfg.DB) && errors.Is(err, store.ErrUnavailable):
		log.Warn("the database does not answer: serving /health, and 503 to the rest until it does; trying again",
			"db", storeopen.Redact(cfg.DB), "error", err)
		s.down = err
		s.setHandler(s.waiting())
	default:
		return nil, err
	}
	if s.ln, err = net.Listen("tcp", cfg.Addr); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	return s, nil
}

// openStore opens the database (migrating it with --migrate) and checks
// that its schema is this program's.
func (s *Server) openStore(ctx context.Context) (store.Store, error) {
	return storeopen.Open(ctx, s.cfg.DB, storeopen.Options{Migrate: s.cfg.Migrate, MaxConns: s.cfg.DBMaxConns})
}

// serveStore builds the engine on st and the transports on the engine,
// and serves them from then on.
func (s *Server) serveStore(st store.Store) error {
	cfg := s.cfg
	ecfg := engine.Config{Shard: cfg.Shard, Logger: s.log, Blobs: s.blobs, Presign: cfg.Presign, Observer: s.metrics,
		MaxWaitingClaims: cfg.MaxWaitingClaims, MaxStreams: cfg.MaxStreams, StitchLease: cfg.StitchLease, Scheduling: cfg.Scheduling,
		Retention: cfg.Retention, UploadRetention: cfg.UploadRetention, RetentionInterval: cfg.RetentionInterval,
		Now: cfg.Now, ReapInterval: cfg.ReapInterval, StitchInterval: cfg.StitchInterval}
	if s.topo.String() != "" { // other shards exist: trees may span them
		peers := rpc.NewPeers(s.topo.URL, cfg.Tokens.Peer, &http.Client{})
		peers.Insecure = cfg.InsecurePeers
		ecfg.Peers, ecfg.PeerGiveUp = peers, cfg.PeerGiveUp
	}
	eng := engine.New(st, ecfg)
	if cfg.Scheduling == engine.SchedulingFIFO {
		s.warnFIFO(st)
	}
	h, err := s.mount(eng)
	if err != nil {
		return err
	}
	s.metrics.Watch(eng, st)
	s.store, s.engine = st, eng
	s.setHandler(h)
	return nil
}

// warnFIFO logs the accounts whose weight or max_running FIFO claims do
// not apply, so that an admin who set them learns why they do nothing.
func (s *Server) warnFIFO(st store.Store) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	accounts, err := st.AccountList(ctx)
	if err != nil {
		s.log.Warn("scheduling fifo: cannot list the accounts to check their weights and max_running", "error", err)
		return
	}
	var names []string
	for _, a := range accounts {
		if a.Weight != 1 || a.MaxRunning > 0 {
			names = append(names, a.Name)
		}
	}
	if len(names) > 0 {
		s.log.Warn("scheduling fifo: these accounts' weight and max_running do not apply; serve with --scheduling fair for them",
			"accounts", strings.Join(names, ","))
	}
}

// mount builds the one handler of every transport: the gRPC and Connect
// services under /scimesh.v1.…/ (and health, reflection), the REST API,
// the dashboard and /metrics everywhere else, all behind the gate.
func (s *Server) mount(eng *engine.Engine) (http.Handler, error) {
	api := httpapi.New(eng, s.gate, s.log, s.cfg.MaxUploadBytes)
	mux := http.NewServeMux()
	known := func(name string) bool { return name == eng.Shard() || s.topo.Known(name) }
	rpc.Mount(mux, eng, s.gate, known, s.log)
	dash, err := ui.New(eng, ui.Config{Gate: s.gate, Topology: s.topo, Logger: s.log, MaxUpload: api.MaxUpload()})
	if err != nil {
		return nil, err
	}
	api.UI, api.Metrics = dash, s.metrics.Handler()
	mux.Handle("/", api)
	return mux, nil
}

// setHandler makes h what the listener serves, behind the request IDs,
// metrics and logs, and the loopback guard of a server without tokens.
func (s *Server) setHandler(h http.Handler) {
	h = s.metrics.Wrap(guardHost(h, s.cfg.Tokens.Client == "" || s.cfg.Tokens.Worker == ""), s.log)
	s.handler.Store(&h)
}

// current serves r with the handler of the moment.
func (s *Server) current(w http.ResponseWriter, r *http.Request) {
	(*s.handler.Load()).ServeHTTP(w, r)
}

// Addr is the address the server listens on, host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the server's base URL: https://Addr with TLS, else http://Addr.
func (s *Server) URL() string {
	if s.tls != nil {
		return "https://" + s.Addr()
	}
	return "http://" + s.Addr()
}

// Engine is the server's engine, for callers that act on it directly (a
// benchmark seeding its backlog, a test checking what a request changed);
// nil for a server made with WaitForDatabase whose database did not
// answer New.
func (s *Server) Engine() *engine.Engine { return s.engine }

// Run serves the API and runs the engine's background loops until ctx is
// done, then shuts the listener down (requests still running are
// cancelled, and given 10 s to end), stops the loops and closes the store.
// It may be called once.
func (s *Server) Run(ctx context.Context) error {
	if s.running {
		return errors.New("server: Run called twice")
	}
	s.running = true
	defer s.Close()
	// HTTP/1.1, and HTTP/2 for gRPC clients: over TLS when the server has
	// a certificate (chosen by ALPN), else without (h2c).
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(s.tls != nil)
	protocols.SetUnencryptedHTTP2(s.tls == nil)
	// Requests run under baseCtx, cancelled at shutdown so that long-polling
	// claims end at once instead of holding the shutdown for a minute.
	baseCtx, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	srv := &http.Server{
		Handler:           http.HandlerFunc(s.current),
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		TLSConfig:         s.tls,
	}
	// The engine's loops start once the store is open: at once, or when
	// the database first answers.
	loopCtx, stopLoops := context.WithCancel(ctx)
	var wg sync.WaitGroup
	failed := make(chan error, 1)
	waiting := s.engine == nil
	wg.Go(func() {
		if waiting {
			if err := s.awaitStore(loopCtx); err != nil {
				if loopCtx.Err() == nil {
					failed <- err
				}
				return
			}
			s.logServing()
		}
		s.engine.Run(loopCtx)
	})
	defer func() {
		stopLoops()
		wg.Wait()
	}()

	errc := make(chan error, 1)
	go func() {
		if s.tls != nil {
			errc <- srv.ServeTLS(s.ln, "", "") // the certificate is in TLSConfig
			return
		}
		errc <- srv.Serve(s.ln)
	}()
	if waiting {
		s.log.Info("waiting for the database", "addr", s.Addr(), "db", storeopen.Redact(s.cfg.DB))
	} else {
		s.logServing()
	}
	var err error
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case err = <-failed:
	case <-ctx.Done():
		s.log.Info("shutting down")
	}
	cancelRequests()
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shut down: %w", err)
	}
	return err
}

// logServing says that the API is served, where and on what.
func (s *Server) logServing() {
	s.log.Info("serving", "addr", s.Addr(), "url", s.URL(), "shard", s.engine.Shard(), "db", storeopen.Redact(s.cfg.DB))
}

// Start runs Run in a goroutine of its own until ctx is done; wait blocks
// until Run has returned and returns its error.
func (s *Server) Start(ctx context.Context) (wait func() error) {
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return sync.OnceValue(func() error { return <-done })
}

// Close releases a server that was never run: its listener and its store.
// Run closes them itself when it returns, so Close then does nothing; it
// is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.ln != nil {
			_ = s.ln.Close() // closed already when Run has shut the server down
		}
		if s.store != nil {
			s.closeErr = s.store.Close()
		}
		if s.blobs != nil {
			s.closeErr = errors.Join(s.closeErr, s.blobs.Close())
		}
	})
	return s.closeErr
}

// guardHost, when open (a server without tokens, hence on loopback),
// answers only requests addressed to a loopback host: a web page that
// rebinds its own name to 127.0.0.1 cannot drive an open coordinator from
// a browser on the same machine.
func guardHost(h http.Handler, open bool) http.Handler {
	if !open {
		return h
	}
	return LoopbackHosts(h, "this coordinator runs without tokens, so it answers only requests to localhost or 127.0.0.1; "+
		"use that address, or set CLIENT_AUTH_TOKEN and WORKER_AUTH_TOKEN")
}

// LoopbackHosts serves h only to requests whose Host names loopback
// (localhost or a loopback IP) and answers others 421 with refusal. A
// listener on loopback alone is not enough: a web page can rebind its own
// name to 127.0.0.1 (DNS rebinding) and have the browser read what it
// serves, but the browser still sends the page's name as Host.
func LoopbackHosts(h http.Handler, refusal string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host // no port
		}
		if !topology.Loopback(host) {
			http.Error(w, refusal, http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// IsLoopback reports whether addr (host:port) is on loopback only:
// localhost or a loopback IP address.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && topology.Loopback(host)
}
