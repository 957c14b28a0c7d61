package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/httpapi"
	"github.com/scimesh/scimesh/internal/server"
	"github.com/scimesh/scimesh/internal/telemetry"
	"github.com/scimesh/scimesh/internal/topology"
)

func newServeCmd() *cobra.Command {
	var migrateFlag bool
	var pprofAddr string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the coordinator: the HTTP API and the background loops",
		Long: `Run the coordinator: the HTTP API and the background loops.

The tokens come from the environment or .env, never from flags (flags show
in ps): WORKER_AUTH_TOKEN for workers, CLIENT_AUTH_TOKEN for clients and
the dashboard, PEER_AUTH_TOKEN for other shards. They must differ. Without
the worker and client tokens serve listens only on loopback, and with a
topology it also needs the peer token.

With --tls-cert and --tls-key it serves HTTPS, and gRPC and Connect over
TLS, on the same port; without them, plain HTTP and h2c.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := resolveServeConfig(cmd)
			if err != nil {
				return err
			}
			cfg.Migrate = migrateFlag
			cfg.WaitForDatabase = true // a replica restarted during a database failover comes back by itself
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if pprofAddr != "" {
				stopPprof, err := startPprof(pprofAddr, cfg.Logger)
				if err != nil {
					return err
				}
				defer stopPprof()
			}
			srv, err := server.New(ctx, *cfg)
			if err != nil {
				return err
			}
			return srv.Run(ctx)
		},
	}
	addStorageFlags(cmd)
	addRetentionFlags(cmd, "retention", "delete jobs final (and trees finished) for this long, with their tasks, logs and results; "+
		"0 keeps them (env SCIMESH_RETENTION)")
	f := cmd.Flags()
	f.String("retention-interval", defaultRetentionInterval.String(), "how often to look for what retention deletes (env SCIMESH_RETENTION_INTERVAL)")
	f.String("addr", defaultAddr, "listen address (env SCIMESH_ADDR)")
	f.String("tls-cert", "", "serve HTTPS, gRPC and Connect over TLS on --addr with this PEM certificate, followed by its "+
		"intermediates; needs --tls-key (env SCIMESH_TLS_CERT)")
	f.String("tls-key", "", "the PEM private key of --tls-cert (env SCIMESH_TLS_KEY)")
	f.String("shard", defaultShard, "this node's shard name, [a-z0-9-]{1,32} (env SCIMESH_SHARD)")
	f.String("topology", "", "static:s0=URL,s1=URL or pattern:http://scimesh-%s:8080; a pattern knows every shard name, so a client's "+
		"tree picks the host PEER_AUTH_TOKEN is sent to, unless --shards lists the shards (env SCIMESH_TOPOLOGY)")
	f.String("shards", "", "with a pattern: topology, the only shards trees may name, such as s0,s1,s2; required with a plain "+
		"http:// pattern and --insecure-peers (env SCIMESH_SHARDS)")
	f.String("peer-give-up", "", "give up on a shard that does not answer for this long, failing the trees waiting for it; 0 never "+
		"(default "+defaultPatternGiveUp.String()+" with a pattern: topology without --shards, 0 with listed shards) (env SCIMESH_PEER_GIVE_UP)")
	f.Bool("insecure-peers", false, "allow sending PEER_AUTH_TOKEN to other shards over plain http:// beyond loopback, "+
		"on a network you trust; with a pattern: topology, only to the shards of --shards (env SCIMESH_INSECURE_PEERS)")
	f.Duration("stitch-lease", engine.DefaultStitchLease, "how long a coordinator's lease on a job's stitch lasts, renewed every third of it while it merges; "+
		"a coordinator that stops mid-stitch leaves it to another after this long (env SCIMESH_STITCH_LEASE)")
	f.Bool("presign", false, "hand workers a time-limited URL straight into the --blobs store for each chunk, so chunk bytes never pass "+
		"through a coordinator; workers must reach the store's endpoint (env SCIMESH_PRESIGN)")
	f.Int64("max-upload-bytes", httpapi.DefaultMaxUploadBytes, "largest upload accepted, in bytes (env SCIMESH_MAX_UPLOAD_BYTES)")
	f.Int("max-waiting-claims", engine.DefaultMaxWaitingClaims, "most claims that wait for work at once (long-polls, Worker.Poll); more get 503 (env SCIMESH_MAX_WAITING_CLAIMS)")
	f.Int("max-streams", engine.DefaultMaxStreams, "most open log-follow and dashboard streams at once; more get 503 (env SCIMESH_MAX_STREAMS)")
	f.String("scheduling", string(engine.SchedulingFair), "the order claims hand out tasks in: fair (shares workers between accounts by weight, "+
		"and an account's between its jobs, fewest leased first) or fifo (priority, then oldest job, whoever owns it) (env SCIMESH_SCHEDULING)")
	f.Int("db-max-conns", 0, "PostgreSQL connections this process opens at most; 0: the URL's pool_max_conns, else 16 (env SCIMESH_DB_MAX_CONNS)")
	f.StringVar(&pprofAddr, "pprof", "", "serve net/http/pprof on this loopback address (such as 127.0.0.1:6060), a listener of its own; off when empty")
	f.BoolVar(&migrateFlag, "migrate", false, "apply pending PostgreSQL migrations before serving")
	f.String("log-level", "info", "least important log lines kept: debug, info, warn or error (env SCIMESH_LOG_LEVEL)")
	return cmd
}

// resolveServeConfig turns serve's flags, the environment and .env into
// the server's config, and refuses settings that would expose it.
func resolveServeConfig(cmd *cobra.Command) (*server.Config, error) {
	e, err := loadEnv()
	if err != nil {
		return nil, err
	}
	sc := resolveStorage(cmd, e)
	if sc.DataDir == "" && sc.Blobs == "" {
		return nil, fmt.Errorf("--data-dir is empty: the coordinator keeps uploaded tables there unless --blobs names a store; name a directory (default %s)", defaultDataDir)
	}
	cfg := &server.Config{
		DB:      sc.DB,
		DataDir: sc.DataDir,
		Blobs:   sc.Blobs,
		Addr:    e.setting(cmd, "addr", "SCIMESH_ADDR", defaultAddr),
		Shard:   e.setting(cmd, "shard", "SCIMESH_SHARD", defaultShard),
		TLSCert: e.setting(cmd, "tls-cert", "SCIMESH_TLS_CERT", ""),
		TLSKey:  e.setting(cmd, "tls-key", "SCIMESH_TLS_KEY", ""),
		Tokens: auth.Tokens{
			Worker: e.get("WORKER_AUTH_TOKEN"),
			Client: e.get("CLIENT_AUTH_TOKEN"),
			Peer:   e.get("PEER_AUTH_TOKEN"),
		},
	}
	if err := cfg.Tokens.Validate(); err != nil {
		return nil, err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(e.setting(cmd, "log-level", "SCIMESH_LOG_LEVEL", "info"))); err != nil {
		return nil, fmt.Errorf("log level: %w; use debug, info, warn or error (--log-level or SCIMESH_LOG_LEVEL)", err)
	}
	cfg.Logger = newLogger(level)
	if v := e.setting(cmd, "presign", "SCIMESH_PRESIGN", "false"); v != "" {
		if cfg.Presign, err = strconv.ParseBool(v); err != nil {
			return nil, fmt.Errorf("presign %q must be true or false (--presign or SCIMESH_PRESIGN)", v)
		}
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
	sched, err := engine.ParseScheduling(e.setting(cmd, "scheduling", "SCIMESH_SCHEDULING", string(engine.SchedulingFair)))
	if err != nil {
		return nil, fmt.Errorf("%w (--scheduling or SCIMESH_SCHEDULING)", err)
	}
	cfg.Scheduling = sched
	rc, err := resolveRetention(cmd, e, "retention")
	if err != nil {
		return nil, err
	}
	cfg.Retention, cfg.UploadRetention = rc.Retention, rc.UploadRetention
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
	if list := e.setting(cmd, "shards", "SCIMESH_SHARDS", ""); list != "" {
		if topo, err = topo.Only(list); err != nil {
			return nil, fmt.Errorf("%w (--shards or SCIMESH_SHARDS)", err)
		}
	}
	cfg.Topology = topo
	if err := resolvePeerSettings(cmd, e, cfg); err != nil {
		return nil, err
	}
	if !server.IsLoopback(cfg.Addr) && (cfg.Tokens.Worker == "" || cfg.Tokens.Client == "") {
		return nil, fmt.Errorf("refusing to listen on %s without tokens: anyone who can reach it could run and read jobs. "+
			"Set WORKER_AUTH_TOKEN and CLIENT_AUTH_TOKEN (in the environment or .env), or listen on loopback (--addr 127.0.0.1:8080)", cfg.Addr)
	}
	if !server.IsLoopback(cfg.Addr) && cfg.Topology.String() != "" && cfg.Tokens.Peer == "" {
		return nil, fmt.Errorf("refusing to listen on %s with a topology but without PEER_AUTH_TOKEN: anyone who can reach it "+
			"could create and fail tasks of trees. Set the same PEER_AUTH_TOKEN on every shard", cfg.Addr)
	}
	return cfg, nil
}

// defaultPatternGiveUp is how long a shard of an open pattern: topology
// (without --shards) may leave a message unanswered: long enough to ride
// out a restart, a rescheduled pod or a database failover, short enough
// that a tree naming a shard that does not exist fails within the hour.
// The shards of a static: topology, or of a pattern with --shards, are the
// operator's list, down only for maintenance, so they are waited for
// without a bound unless --peer-give-up sets one.
const defaultPatternGiveUp = time.Hour

// resolvePeerSettings sets cfg's --peer-give-up and --insecure-peers, and
// refuses a topology with listed shards (static:, or a pattern with
// --shards) that would send the peer token over plain HTTP beyond loopback
// (an open pattern's shards are checked at each delivery, by rpc.Peers,
// since their hosts depend on their names). With --insecure-peers it
// refuses an open plain-http pattern: a client's tree would pick the host
// that the peer token goes to in the clear.
func resolvePeerSettings(cmd *cobra.Command, e *env, cfg *server.Config) error {
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
	if cfg.Tokens.Peer == "" {
		return nil
	}
	if cfg.InsecurePeers {
		if u, _ := cfg.Topology.URL(cfg.Shard); cfg.Topology.Open() && topology.PlainRemote(u) {
			return fmt.Errorf("refusing --insecure-peers with the plain-HTTP pattern %s and no list of shards: any shard name a client's tree "+
				"gives makes a host the coordinator sends PEER_AUTH_TOKEN to in the clear. List this mesh's shards with --shards s0,s1,… "+
				"(SCIMESH_SHARDS), or use an https:// pattern", cfg.Topology)
		}
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
