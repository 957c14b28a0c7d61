package config

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/scimesh/scimesh/internal/engine"
)

// serveEnv is an environment serve accepts on any address.
func serveEnv(more ...string) map[string]string {
	env := map[string]string{"WORKER_AUTH_TOKEN": "worker-token-0123456789", "CLIENT_AUTH_TOKEN": "client-token-0123456789"}
	for _, kv := range more {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

func TestServe(t *testing.T) {
	t.Parallel()
	none := func(*pflag.FlagSet) {}
	s := source(t, none, nil, serveEnv("SCIMESH_ADDR=0.0.0.0:8080", "SCIMESH_MAX_STREAMS=7", "SCIMESH_SCHEDULING=fifo",
		"SCIMESH_TOPOLOGY=pattern:https://scimesh-%s:8443", "PEER_AUTH_TOKEN=peer-token-0123456789"), nil)
	cfg, err := s.Serve()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != "0.0.0.0:8080" || cfg.Shard != DefaultShard || cfg.DB != DefaultDB || cfg.MaxStreams != 7 || cfg.Scheduling != engine.SchedulingFIFO ||
		cfg.Retention != DefaultRetention || cfg.RetentionInterval != DefaultRetentionInterval || cfg.PeerGiveUp != DefaultPatternGiveUp || cfg.Logger == nil {
		t.Fatalf("config %+v", cfg)
	}

	for _, c := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no tokens beyond loopback", map[string]string{"SCIMESH_ADDR": "0.0.0.0:0", "WORKER_AUTH_TOKEN": "only-one"},
			"refusing to listen on 0.0.0.0:0 without tokens"},
		{"a topology without the peer token beyond loopback", serveEnv("SCIMESH_ADDR=0.0.0.0:0", "SCIMESH_TOPOLOGY=static:s1=http://h1:8080"),
			"without PEER_AUTH_TOKEN"},
		{"one token for two roles", map[string]string{"WORKER_AUTH_TOKEN": "same-token-0123456789", "CLIENT_AUTH_TOKEN": "same-token-0123456789"},
			"CLIENT_AUTH_TOKEN and WORKER_AUTH_TOKEN are the same token"},
		{"a log level that is none", serveEnv("SCIMESH_LOG_LEVEL=loud"), "use debug, info, warn or error"},
		{"a shard name that is none", serveEnv("SCIMESH_SHARD=Bad_Shard"), "shard name"},
		{"a count that is not positive", serveEnv("SCIMESH_MAX_WAITING_CLAIMS=0"), "max-waiting-claims \"0\" must be a positive number"},
		{"a scheduling that is none", serveEnv("SCIMESH_SCHEDULING=lottery"), "SCIMESH_SCHEDULING"},
		{"a stitch lease under a second", serveEnv("SCIMESH_STITCH_LEASE=10ms"), "at least 1s"},
		{"the peer token in the clear", serveEnv("PEER_AUTH_TOKEN=peer-token-0123456789", "SCIMESH_TOPOLOGY=static:s0=http://10.0.0.1:8080,s1=http://10.0.0.2:8080"),
			"refusing to send PEER_AUTH_TOKEN to shard s1 over plain HTTP"},
		{"--insecure-peers with an open plain pattern", serveEnv("PEER_AUTH_TOKEN=peer-token-0123456789", "SCIMESH_INSECURE_PEERS=true",
			"SCIMESH_TOPOLOGY=pattern:http://scimesh-%s:8080"), "refusing --insecure-peers with the plain-HTTP pattern"},
	} {
		s := source(t, none, nil, c.env, nil)
		_, err := s.Serve()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}

	// An empty --data-dir leaves nowhere for uploads.
	s = source(t, AddStorageFlags, []string{"--data-dir", ""}, serveEnv(), nil)
	if _, err := s.Serve(); err == nil || !strings.Contains(err.Error(), "--data-dir is empty") {
		t.Errorf("an empty --data-dir: %v", err)
	}
	// The peer token in the clear, allowed on a network the operator trusts.
	s = source(t, none, nil, serveEnv("PEER_AUTH_TOKEN=peer-token-0123456789", "SCIMESH_INSECURE_PEERS=true",
		"SCIMESH_TOPOLOGY=static:s0=http://10.0.0.1:8080,s1=http://10.0.0.2:8080", "SCIMESH_PEER_GIVE_UP=2h"), nil)
	if cfg, err := s.Serve(); err != nil || !cfg.InsecurePeers || cfg.PeerGiveUp != 2*time.Hour {
		t.Errorf("--insecure-peers with listed shards: %+v, %v", cfg, err)
	}
}
