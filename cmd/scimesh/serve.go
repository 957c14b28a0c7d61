package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/config"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/httpapi"
	"github.com/scimesh/scimesh/internal/server"
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
			src, err := config.Load(cmd.Flags())
			if err != nil {
				return err
			}
			cfg, err := src.Serve()
			if err != nil {
				return err
			}
			cfg.Migrate = migrateFlag
			cfg.WaitForDatabase = true // a replica restarted during a database failover comes back by itself
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if pprofAddr != "" {
				stopPprof, err := server.StartPprof(pprofAddr, cfg.Logger)
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
	f := cmd.Flags()
	config.AddStorageFlags(f)
	config.AddRetentionFlags(f, "retention", "delete jobs final (and trees finished) for this long, with their tasks, logs and results; "+
		"0 keeps them (env SCIMESH_RETENTION)")
	f.String("retention-interval", config.DefaultRetentionInterval.String(), "how often to look for what retention deletes (env SCIMESH_RETENTION_INTERVAL)")
	f.String("addr", config.DefaultAddr, "listen address (env SCIMESH_ADDR)")
	f.String("tls-cert", "", "serve HTTPS, gRPC and Connect over TLS on --addr with this PEM certificate, followed by its "+
		"intermediates; needs --tls-key (env SCIMESH_TLS_CERT)")
	f.String("tls-key", "", "the PEM private key of --tls-cert (env SCIMESH_TLS_KEY)")
	f.String("shard", config.DefaultShard, "this node's shard name, [a-z0-9-]{1,32} (env SCIMESH_SHARD)")
	f.String("topology", "", "static:s0=URL,s1=URL or pattern:http://scimesh-%s:8080; a pattern knows every shard name, so a client's "+
		"tree picks the host PEER_AUTH_TOKEN is sent to, unless --shards lists the shards (env SCIMESH_TOPOLOGY)")
	f.String("shards", "", "with a pattern: topology, the only shards trees may name, such as s0,s1,s2; required with a plain "+
		"http:// pattern and --insecure-peers (env SCIMESH_SHARDS)")
	f.String("peer-give-up", "", "give up on a shard that does not answer for this long, failing the trees waiting for it; 0 never "+
		"(default "+config.DefaultPatternGiveUp.String()+" with a pattern: topology without --shards, 0 with listed shards) (env SCIMESH_PEER_GIVE_UP)")
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
