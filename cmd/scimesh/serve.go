package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/httpapi"
	"github.com/scimesh/scimesh/internal/rpc"
	"github.com/scimesh/scimesh/internal/store/storeopen"
	"github.com/scimesh/scimesh/internal/telemetry"
	"github.com/scimesh/scimesh/internal/topology"
	"github.com/scimesh/scimesh/internal/ui"
)

// serveConfig is everything `scimesh serve` needs, resolved from flags,
// environment and .env.
type serveConfig struct {
	storageConfig
	Addr     string
	Shard    string
	Topology *topology.Topology // nil: a single shard
	Tokens   auth.Tokens
	Migrate  bool
	// retentionConfig says how long finished jobs, trees and unused
	// uploads are kept; RetentionInterval how often the loop looks.
	retentionConfig
	RetentionInterval time.Duration
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
	// DBMaxConns is the PostgreSQL pool's size; 0 means the URL's
	// pool_max_conns, else 16.
	DBMaxConns int
	// BodyGrace and BodyRate, when set, replace the gate's bounds on a
	// body that trickles in (auth.Gate); tests shorten them.
	BodyGrace time.Duration
	BodyRate  int64
	// LogLevel is the least important level logged.
	LogLevel slog.Level
	// Metrics is the engine's Observer, served at GET /metrics; nil makes
	// runServer build its own, without the engine's counters.
	Metrics *telemetry.Metrics
}

func newServeCmd() *cobra.Command {
	var migrateFlag bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the coordinator: the HTTP API and the background loops",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := resolveServeConfig(cmd)
			if err != nil {
				return err
			}
			cfg.Migrate = migrateFlag
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return serve(ctx, cfg, newLogger(cfg.LogLevel), nil)
		},
	}
	addStorageFlags(cmd)
	addRetentionFlags(cmd, "retention", "delete jobs final (and trees finished) for this long, with their tasks, logs and results; "+
		"0 keeps them (env SCIMESH_RETENTION)")
	f := cmd.Flags()
	f.String("retention-interval", defaultRetentionInterval.String(), "how often to look for what retention deletes (env SCIMESH_RETENTION_INTERVAL)")
	f.String("addr", defaultAddr, "listen address (env SCIMESH_ADDR)")
	f.String("shard", defaultShard, "this node's shard name, [a-z0-9-]{1,32} (env SCIMESH_SHARD)")
	f.String("topology", "", "static:s0=URL,s1=URL or pattern:http://scimesh-%s:8080 (env SCIMESH_TOPOLOGY)")
	f.String("peer-give-up", "", "give up on a shard that does not answer for this long, failing the trees waiting for it; 0 never "+
		"(default "+defaultPatternGiveUp.String()+" with a pattern: topology, 0 with a static: one) (env SCIMESH_PEER_GIVE_UP)")
	f.Bool("insecure-peers", false, "allow sending PEER_AUTH_TOKEN to other shards over plain http:// beyond loopback, "+
		"on a network you trust (env SCIMESH_INSECURE_PEERS)")
	f.Duration("stitch-lease", engine.DefaultStitchLease, "how long a coordinator's lease on a job's stitch lasts, renewed every third of it while it merges; "+
		"a coordinator that stops mid-stitch leaves it to another after this long (env SCIMESH_STITCH_LEASE)")
	f.Int64("max-upload-bytes", httpapi.DefaultMaxUploadBytes, "largest upload accepted, in bytes (env SCIMESH_MAX_UPLOAD_BYTES)")
	f.Int("max-waiting-claims", engine.DefaultMaxWaitingClaims, "most claims that wait for work at once (long-polls, Worker.Poll); more get 503 (env SCIMESH_MAX_WAITING_CLAIMS)")
	f.Int("max-streams", engine.DefaultMaxStreams, "most open log-follow and dashboard streams at once; more get 503 (env SCIMESH_MAX_STREAMS)")
	f.Int("db-max-conns", 0, "PostgreSQL connections this process opens at most; 0: the URL's pool_max_conns, else 16 (env SCIMESH_DB_MAX_CONNS)")
	f.BoolVar(&migrateFlag, "migrate", false, "apply pending PostgreSQL migrations before serving")
	f.String("log-level", "info", "least important log lines kept: debug, info, warn or error (env SCIMESH_LOG_LEVEL)")
	return cmd
}

func resolveServeConfig(cmd *cobra.Command) (*serveConfig, error) {
	e, err := loadEnv()
	if err != nil {
		return nil, err
	}
	cfg := &serveConfig{
		storageConfig: resolveStorage(cmd, e),
		Addr:          e.setting(cmd, "addr", "SCIMESH_ADDR", defaultAddr),
		Shard:         e.setting(cmd, "shard", "SCIMESH_SHARD", defaultShard),
		Tokens: auth.Tokens{
			Worker: e.get("WORKER_AUTH_TOKEN"),
			Client: e.get("CLIENT_AUTH_TOKEN"),
			Peer:   e.get("PEER_AUTH_TOKEN"),
		},
	}
	if err := cfg.Tokens.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(e.setting(cmd, "log-level", "SCIMESH_LOG_LEVEL", "info"))); err != nil {
		return nil, fmt.Errorf("log level: %w; use debug, info, warn or error (--log-level or SCIMESH_LOG_LEVEL)", err)
	}
	if v := e.setting(cmd, "max-upload-bytes", "SCIMESH_MAX_UPLOAD_BYTES", ""); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("max upload bytes %q must be a positive number of bytes (--max-upload-bytes or SCIMESH_MAX_UPLOAD_BYTES)", v)
		}
		cfg.MaxUploadBytes = n
	}
	for _, c := range []struct {
		flag, env string
		to        *int
	}{{"max-waiting-claims", "SCIMESH_MAX_WAITING_CLAIMS", &cfg.MaxWaitingClaims}, {"max-streams", "SCIMESH_MAX_STREAMS", &cfg.MaxStreams},
		{"db-max-conns", "SCIMESH_DB_MAX_CONNS", &cfg.DBMaxConns}} {
		if v := e.setting(cmd, c.flag, c.env, ""); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("%s %q must be a positive number (--%s or %s)", c.flag, v, c.flag, c.env)
			}
			*c.to = n
		}
	}
	if cfg.retentionConfig, err = resolveRetention(cmd, e, "retention"); err != nil {
		return nil, err
	}
	v := e.setting(cmd, "retention-interval", "SCIMESH_RETENTION_INTERVAL", defaultRetentionInterval.String())
	if cfg.RetentionInterval, err = time.ParseDuration(v); err != nil || cfg.RetentionInterval <= 0 {
		return nil, fmt.Errorf("retention interval %q must be a positive duration such as 10m (--retention-interval or SCIMESH_RETENTION_INTERVAL)", v)
	}
	if v := e.setting(cmd, "stitch-lease", "SCIMESH_STITCH_LEASE", ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return nil, fmt.Errorf("stitch lease %q must be a duration of at least 1s, such as 60s or 5m (--stitch-lease or SCIMESH_STITCH_LEASE)", v)
		}
		cfg.StitchLease = d
	}
	if err := checkShard(cfg.Shard); err != nil {
		return nil, err
	}
	topo, err := topology.Parse(e.setting(cmd, "topology", "SCIMESH_TOPOLOGY", ""))
	if err != nil {
		return nil, fmt.Errorf("%w; set --topology or SCIMESH_TOPOLOGY", err)
	}
	cfg.Topology = topo
	if err := resolvePeerSettings(cmd, e, cfg); err != nil {
		return nil, err
	}
	if !isLoopback(cfg.Addr) && (cfg.Tokens.Worker == "" || cfg.Tokens.Client == "") {
		return nil, fmt.Errorf("refusing to listen on %s without tokens: anyone who can reach it could run and read jobs. "+
			"Set WORKER_AUTH_TOKEN and CLIENT_AUTH_TOKEN (in the environment or .env), or listen on loopback (--addr 127.0.0.1:8080)", cfg.Addr)
	}
	if !isLoopback(cfg.Addr) && cfg.Topology.String() != "" && cfg.Tokens.Peer == "" {
		return nil, fmt.Errorf("refusing to listen on %s with a topology but without PEER_AUTH_TOKEN: anyone who can reach it "+
			"could create and fail tasks of trees. Set the same PEER_AUTH_TOKEN on every shard", cfg.Addr)
	}
	return cfg, nil
}

// defaultPatternGiveUp is how long a shard of a pattern: topology may
// leave a message unanswered: long enough to ride out a restart, a
// rescheduled pod or a database failover, short enough that a tree naming
// a shard that does not exist fails within the hour. The shards of a
// static: topology are the operator's list, down only for maintenance, so
// they are waited for without a bound unless --peer-give-up sets one.
const defaultPatternGiveUp = time.Hour

// resolvePeerSettings sets cfg's --peer-give-up and --insecure-peers, and
// refuses a static topology that would send the peer token over plain
// HTTP beyond loopback (a pattern's shards are checked at each delivery,
// by rpc.Peers, since their hosts depend on their names).
func resolvePeerSettings(cmd *cobra.Command, e *env, cfg *serveConfig) error {
	if cfg.Topology.Open() {
		cfg.PeerGiveUp = defaultPatternGiveUp
	}
	if v := e.setting(cmd, "peer-give-up", "SCIMESH_PEER_GIVE_UP", ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("peer give-up %q must be a duration such as 10m or 2h, or 0 to wait for ever (--peer-give-up or SCIMESH_PEER_GIVE_UP)", v)
		}
		cfg.PeerGiveUp = d
	}
	if v := e.setting(cmd, "insecure-peers", "SCIMESH_INSECURE_PEERS", "false"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("insecure peers %q must be true or false (--insecure-peers or SCIMESH_INSECURE_PEERS)", v)
		}
		cfg.InsecurePeers = b
	}
	if cfg.InsecurePeers || cfg.Tokens.Peer == "" {
		return nil
	}
	for _, s := range cfg.Topology.Shards() {
		if u, _ := cfg.Topology.URL(s); s != cfg.Shard && topology.PlainRemote(u) {
			return fmt.Errorf("refusing to send PEER_AUTH_TOKEN to shard %s over plain HTTP (%s): anyone on the network path could read it "+
				"and create, fail or cancel tasks on every shard. Give the shards https:// URLs in --topology (behind a TLS proxy, say), "+
				"or pass --insecure-peers (SCIMESH_INSECURE_PEERS=true) on a network you trust", s, u)
		}
	}
	return nil
}

// newLogger is the coordinator's logger: text lines to stderr, with the
// request ID of the context they are logged with.
func newLogger(level slog.Level) *slog.Logger {
	return slog.New(telemetry.NewLogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
}

// serve runs a coordinator until ctx is done. When ready is not nil it
// receives the listening address once the server accepts connections.
func serve(ctx context.Context, cfg *serveConfig, log *slog.Logger, ready func(addr string)) error {
	blobs, err := storeopen.Blobs(cfg.DataDir)
	if err != nil {
		return err
	}
	st, err := storeopen.Open(ctx, cfg.DB, storeopen.Options{Migrate: cfg.Migrate, MaxConns: cfg.DBMaxConns})
	if err != nil {
		return err
	}
	defer st.Close()
	metrics := telemetry.New(log)
	ecfg := engine.Config{Shard: cfg.Shard, Logger: log, Blobs: blobs, Observer: metrics,
		MaxWaitingClaims: cfg.MaxWaitingClaims, MaxStreams: cfg.MaxStreams, StitchLease: cfg.StitchLease,
		Retention: cfg.Retention, UploadRetention: cfg.UploadRetention, RetentionInterval: cfg.RetentionInterval}
	if cfg.Topology.String() != "" { // other shards exist: trees may span them
		peers := rpc.NewPeers(cfg.Topology.URL, cfg.Tokens.Peer, &http.Client{})
		peers.Insecure = cfg.InsecurePeers
		ecfg.Peers, ecfg.PeerGiveUp = peers, cfg.PeerGiveUp
		if u, _ := cfg.Topology.URL(cfg.Shard); cfg.Topology.Open() && cfg.Tokens.Peer != "" && !cfg.InsecurePeers && topology.PlainRemote(u) {
			log.Warn("the topology's pattern is plain http://: messages to shards that are not on loopback will be refused, failing their trees; "+
				"use an https:// pattern, or --insecure-peers on a network you trust", "topology", cfg.Topology.String())
		}
	}
	eng := engine.New(st, ecfg)
	metrics.Watch(eng, st)
	cfg.Metrics = metrics
	return runServer(ctx, eng, cfg, log, ready)
}

// startLocal serves eng on a free loopback port until ctx is done, and
// returns its URL once it accepts connections, or the error that kept it
// from starting. wait blocks until the server has stopped.
func startLocal(ctx context.Context, eng *engine.Engine, log *slog.Logger) (base string, wait func() error, err error) {
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runServer(ctx, eng, &serveConfig{Addr: "127.0.0.1:0"}, log, func(a string) { addrc <- a })
	}()
	wait = sync.OnceValue(func() error { return <-done })
	select {
	case a := <-addrc:
		return "http://" + a, wait, nil
	case err := <-done:
		return "", nil, err
	}
}

// runServer serves eng's API on cfg.Addr and runs its background loops
// until ctx is done.
func runServer(ctx context.Context, eng *engine.Engine, cfg *serveConfig, log *slog.Logger, ready func(addr string)) error {
	if short := cfg.Tokens.Short(); len(short) > 0 {
		log.Warn("weak tokens: use at least 16 random bytes for each (e.g. openssl rand -hex 32)", "tokens", strings.Join(short, ","))
	}
	gate := auth.NewGate(cfg.Tokens)
	if cfg.BodyGrace > 0 {
		gate.BodyGrace, gate.BodyRate = cfg.BodyGrace, cfg.BodyRate
	}
	api := httpapi.New(eng, gate, log)
	if cfg.MaxUploadBytes > 0 {
		api.MaxUploadBytes = cfg.MaxUploadBytes
	}
	// One port: the gRPC and Connect services under /scimesh.v1.…/ (and
	// health, reflection), the REST API everywhere else.
	mux := http.NewServeMux()
	topo := cfg.Topology
	if topo == nil {
		topo = &topology.Topology{}
	}
	known := func(s string) bool { return s == eng.Shard() || topo.Known(s) }
	rpc.Mount(mux, eng, gate, known, log)
	dash, err := ui.New(eng, ui.Config{Gate: gate, Topology: topo, Logger: log})
	if err != nil {
		return err
	}
	metrics := cfg.Metrics
	if metrics == nil {
		metrics = telemetry.New(log)
		metrics.Watch(eng, nil)
	}
	api.UI, api.Metrics = dash, metrics.Handler()
	mux.Handle("/", api)
	// HTTP/1.1 and HTTP/2 without TLS (h2c), which gRPC clients speak.
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	// Requests run under baseCtx, cancelled at shutdown so that long-polling
	// claims end at once instead of holding the shutdown for a minute.
	baseCtx, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	srv := &http.Server{
		Handler:           metrics.Wrap(guardHost(mux, cfg.Tokens.Client == "" || cfg.Tokens.Worker == ""), log),
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
	}
	loopCtx, stopLoops := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { eng.Run(loopCtx) })
	defer func() {
		stopLoops()
		wg.Wait()
	}()

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("serving", "addr", ln.Addr().String(), "shard", cfg.Shard, "db", storeopen.Redact(cfg.DB))
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	cancelRequests()
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shut down: %w", err)
	}
	return nil
}

// guardHost, when open (a server without tokens, hence on loopback),
// answers only requests addressed to a loopback host: a web page that
// rebinds its own name to 127.0.0.1 cannot drive an open coordinator from
// a browser on the same machine.
func guardHost(h http.Handler, open bool) http.Handler {
	if !open {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if _, _, err := net.SplitHostPort(host); err != nil {
			host = net.JoinHostPort(host, "0")
		}
		if !isLoopback(host) {
			http.Error(w, "this coordinator runs without tokens, so it answers only requests to localhost or 127.0.0.1; "+
				"use that address, or set CLIENT_AUTH_TOKEN and WORKER_AUTH_TOKEN", http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}
