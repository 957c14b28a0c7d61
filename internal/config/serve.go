package config

import (
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/server"
	"github.com/scimesh/scimesh/internal/topology"
)

// Serve resolves serve's settings into the coordinator's config, and
// refuses settings that would expose it.
func (s *Source) Serve() (*server.Config, error) {
	sc := s.Storage()
	if sc.DataDir == "" && sc.Blobs == "" {
		return nil, fmt.Errorf("--data-dir is empty: the coordinator keeps uploaded tables there unless --blobs names a store; name a directory (default %s)", DefaultDataDir)
	}
	cfg := &server.Config{
		DB:      sc.DB,
		DataDir: sc.DataDir,
		Blobs:   sc.Blobs,
		Addr:    s.Setting("addr", "SCIMESH_ADDR", DefaultAddr),
		Shard:   s.Setting("shard", "SCIMESH_SHARD", DefaultShard),
		TLSCert: s.Setting("tls-cert", "SCIMESH_TLS_CERT", ""),
		TLSKey:  s.Setting("tls-key", "SCIMESH_TLS_KEY", ""),
		Tokens: auth.Tokens{
			Worker: s.Get("WORKER_AUTH_TOKEN"),
			Client: s.Get("CLIENT_AUTH_TOKEN"),
			Peer:   s.Get("PEER_AUTH_TOKEN"),
		},
	}
	if err := cfg.Tokens.Validate(); err != nil {
		return nil, err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(s.Setting("log-level", "SCIMESH_LOG_LEVEL", "info"))); err != nil {
		return nil, fmt.Errorf("log level: %w; use debug, info, warn or error (--log-level or SCIMESH_LOG_LEVEL)", err)
	}
	cfg.Logger = NewLogger(level)
	var err error
	if v := s.Setting("presign", "SCIMESH_PRESIGN", "false"); v != "" {
		if cfg.Presign, err = strconv.ParseBool(v); err != nil {
			return nil, fmt.Errorf("presign %q must be true or false (--presign or SCIMESH_PRESIGN)", v)
		}
	}
	if v := s.Setting("max-upload-bytes", "SCIMESH_MAX_UPLOAD_BYTES", ""); v != "" {
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
		if v := s.Setting(c.flag, c.env, ""); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("%s %q must be a positive number (--%s or %s)", c.flag, v, c.flag, c.env)
			}
			*c.to = n
		}
	}
	sched, err := engine.ParseScheduling(s.Setting("scheduling", "SCIMESH_SCHEDULING", string(engine.SchedulingFair)))
	if err != nil {
		return nil, fmt.Errorf("%w (--scheduling or SCIMESH_SCHEDULING)", err)
	}
	cfg.Scheduling = sched
	rc, err := s.Retention("retention")
	if err != nil {
		return nil, err
	}
	cfg.Retention, cfg.UploadRetention = rc.Jobs, rc.Uploads
	v := s.Setting("retention-interval", "SCIMESH_RETENTION_INTERVAL", DefaultRetentionInterval.String())
	if cfg.RetentionInterval, err = time.ParseDuration(v); err != nil || cfg.RetentionInterval <= 0 {
		return nil, fmt.Errorf("retention interval %q must be a positive duration such as 10m (--retention-interval or SCIMESH_RETENTION_INTERVAL)", v)
	}
	if v := s.Setting("stitch-lease", "SCIMESH_STITCH_LEASE", ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return nil, fmt.Errorf("stitch lease %q must be a duration of at least 1s, such as 60s or 5m (--stitch-lease or SCIMESH_STITCH_LEASE)", v)
		}
		cfg.StitchLease = d
	}
	if err := checkShard(cfg.Shard); err != nil {
		return nil, err
	}
	topo, err := topology.Parse(s.Setting("topology", "SCIMESH_TOPOLOGY", ""))
	if err != nil {
		return nil, fmt.Errorf("%w; set --topology or SCIMESH_TOPOLOGY", err)
	}
	if list := s.Setting("shards", "SCIMESH_SHARDS", ""); list != "" {
		if topo, err = topo.Only(list); err != nil {
			return nil, fmt.Errorf("%w (--shards or SCIMESH_SHARDS)", err)
		}
	}
	cfg.Topology = topo
	if err := s.peers(cfg); err != nil {
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

// DefaultPatternGiveUp is how long a shard of an open pattern: topology
// (without --shards) may leave a message unanswered: long enough to ride
// out a restart, a rescheduled pod or a database failover, short enough
// that a tree naming a shard that does not exist fails within the hour.
// The shards of a static: topology, or of a pattern with --shards, are the
// operator's list, down only for maintenance, so they are waited for
// without a bound unless --peer-give-up sets one.
const DefaultPatternGiveUp = time.Hour

// peers sets cfg's --peer-give-up and --insecure-peers, and
// refuses a topology with listed shards (static:, or a pattern with
// --shards) that would send the peer token over plain HTTP beyond loopback
// (an open pattern's shards are checked at each delivery, by rpc.Peers,
// since their hosts depend on their names). With --insecure-peers it
// refuses an open plain-http pattern: a client's tree would pick the host
// that the peer token goes to in the clear.
func (s *Source) peers(cfg *server.Config) error {
	if cfg.Topology.Open() {
		cfg.PeerGiveUp = DefaultPatternGiveUp
	}
	if v := s.Setting("peer-give-up", "SCIMESH_PEER_GIVE_UP", ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("peer give-up %q must be a duration such as 10m or 2h, or 0 to wait for ever (--peer-give-up or SCIMESH_PEER_GIVE_UP)", v)
		}
		cfg.PeerGiveUp = d
	}
	if v := s.Setting("insecure-peers", "SCIMESH_INSECURE_PEERS", "false"); v != "" {
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
