package e2e

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
)

// recordingProxy is an HTTP proxy that answers every request 503 and
// records what reached it: what a coordinator would have put on the wire
// to a host beyond loopback.
type recordingProxy struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string // "HOST AUTHORIZATION"
}

func newRecordingProxy(t *testing.T) *recordingProxy {
	p := &recordingProxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen = append(p.seen, r.Host+" "+r.Header.Get("Authorization"))
		p.mu.Unlock()
		http.Error(w, "no such shard", http.StatusServiceUnavailable)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *recordingProxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// submitToSilentShard submits to the coordinator at url a tree whose leaf
// is on shard s7, and returns the root's ID.
func submitToSilentShard(t *testing.T, url string) string {
	t.Helper()
	q := scimeshv1connect.NewQueueClient(http.DefaultClient, url, withToken("ctok"))
	sub, err := q.Submit(t.Context(), connect.NewRequest(&v1.SubmitRequest{Tasks: []*v1.TaskSpec{
		{Id: "s0:r", Workload: "f", Args: []*v1.Arg{ref("s7:x"), val(1)}},
		{Id: "s7:x", Workload: "f"},
	}}))
	if err != nil {
		t.Fatalf("Submit of a tree with a leaf on s7: %v", err)
	}
	return sub.Msg.RootId
}

// waitFailed waits until task id of the coordinator at url has failed,
// and returns its error.
func waitFailed(t *testing.T, url, id string, within time.Duration) string {
	t.Helper()
	q := scimeshv1connect.NewQueueClient(http.DefaultClient, url, withToken("ctok"))
	deadline := time.Now().Add(within)
	for {
		info, err := q.Query(t.Context(), connect.NewRequest(&v1.QueryRequest{TaskId: id}))
		if err == nil && info.Msg.State == "failed" {
			return info.Msg.Error
		}
		if time.Now().After(deadline) {
			var state string
			if err == nil {
				state = info.Msg.State
			}
			t.Fatalf("task %s not failed after %v: %q %v", id, within, state, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPeerTokenRefusedOverPlainHTTP: a static topology that would send the
// peer token over plain HTTP beyond loopback is refused at start, unless
// --insecure-peers (or SCIMESH_INSECURE_PEERS) says the network is
// trusted; https, loopback, or no peer token at all start as they are.
func TestPeerTokenRefusedOverPlainHTTP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "scimesh.db")
	topo := "static:s0=http://127.0.0.1:1,s1=http://h1.example.org:8080"
	out, err := run(t, dir, meshEnv, "serve", "--db", db, "--topology", topo)
	for _, want := range []string{"refusing to send PEER_AUTH_TOKEN to shard s1 over plain HTTP (http://h1.example.org:8080)", "https://", "--insecure-peers"} {
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("serve with a plain-HTTP peer: err %v, output does not say %q:\n%s", err, want, out)
		}
	}
	out, err = run(t, dir, append([]string{"SCIMESH_INSECURE_PEERS=maybe"}, meshEnv...), "serve", "--db", db, "--topology", topo)
	if err == nil || !strings.Contains(out, "must be true or false") {
		t.Fatalf("serve with SCIMESH_INSECURE_PEERS=maybe: err %v, output:\n%s", err, out)
	}
	out, err = run(t, dir, meshEnv, "serve", "--db", db, "--topology", topo, "--peer-give-up", "soon")
	if err == nil || !strings.Contains(out, "must be a duration") {
		t.Fatalf("serve with --peer-give-up soon: err %v, output:\n%s", err, out)
	}
	for name, c := range map[string]struct {
		env  []string
		args []string
	}{
		"--insecure-peers":       {meshEnv, []string{"--topology", topo, "--insecure-peers"}},
		"SCIMESH_INSECURE_PEERS": {append([]string{"SCIMESH_INSECURE_PEERS=true"}, meshEnv...), []string{"--topology", topo}},
		"https":                  {meshEnv, []string{"--topology", "static:s0=http://127.0.0.1:1,s1=https://h1.example.org:8443"}},
		"loopback":               {meshEnv, []string{"--topology", "static:s1=http://localhost:1,s2=http://[::1]:1,s3=http://127.0.0.2:1"}},
		"own shard's URL unused": {meshEnv, []string{"--topology", "static:s0=http://h0.example.org:8080,s1=https://h1.example.org:8443"}},
		"no peer token to send":  {tokenEnv, []string{"--topology", topo}},
		"pattern, checked later": {meshEnv, []string{"--topology", "pattern:http://scimesh-%s:8080"}},
	} {
		p := serveProc(t, t.TempDir(), c.env, append([]string{"--db", "sqlite:" + filepath.Join(t.TempDir(), "db")}, c.args...)...)
		_ = p.Cmd.Process.Kill()
		if name == "pattern, checked later" && !strings.Contains(p.Stderr.String(), "plain http://") {
			t.Errorf("serve with a plain-HTTP pattern does not warn:\n%s", p.Stderr.String())
		}
	}
}

// TestPeerTokenNotSentOverPlainHTTP: with a pattern topology, a message to
// a shard whose URL is plain HTTP beyond loopback is not sent — nothing
// reaches the network (here a proxy standing for it) — and fails its tree
// like a refusal, saying what to do. With --insecure-peers (and the
// shards listed, which it requires) it is sent, token and all, and a
// shard that never answers is given up on after --peer-give-up, failing
// the tree with an error naming the shard.
func TestPeerTokenNotSentOverPlainHTTP(t *testing.T) {
	t.Parallel()
	proxy := newRecordingProxy(t)
	env := append([]string{"HTTP_PROXY=" + proxy.URL}, meshEnv...)
	topo := "pattern:http://scimesh-%s:8080"

	dir := t.TempDir()
	p := serveProc(t, dir, env, "--db", "sqlite:"+filepath.Join(dir, "db"), "--topology", topo)
	root := submitToSilentShard(t, p.URL)
	msg := waitFailed(t, p.URL, root, meshWait)
	for _, want := range []string{"could not be created on shard s7", "not sending PEER_AUTH_TOKEN to shard s7 over plain HTTP (http://scimesh-s7:8080)",
		"https://", "--insecure-peers"} {
		if !strings.Contains(msg, want) {
			t.Errorf("root's error %q does not say %q", msg, want)
		}
	}
	if got := proxy.requests(); len(got) != 0 {
		t.Fatalf("requests left the machine without --insecure-peers: %q", got)
	}

	dir = t.TempDir()
	p = serveProc(t, dir, env, "--db", "sqlite:"+filepath.Join(dir, "db"), "--topology", topo, "--insecure-peers", "--shards", "s0,s7",
		"--peer-give-up", "3s")
	start := time.Now()
	root = submitToSilentShard(t, p.URL)
	msg = waitFailed(t, p.URL, root, meshWait)
	if took := time.Since(start); took < 3*time.Second {
		t.Errorf("gave up on s7 after %v, before --peer-give-up 3s", took)
	}
	for _, want := range []string{`shard "s7" did not answer for `, "(http://scimesh-s7:8080: unavailable", "gave up on the tree", "--peer-give-up"} {
		if !strings.Contains(msg, want) {
			t.Errorf("root's error %q does not say %q", msg, want)
		}
	}
	got := proxy.requests()
	if len(got) == 0 || got[0] != "scimesh-s7:8080 Bearer ptok" {
		t.Fatalf("with --insecure-peers, the proxy saw %q, want the token sent to scimesh-s7:8080", got)
	}
}

// TestTreeGivesUpOnMissingShard: a tree may name any shard of a pattern
// topology; one that never answers (nothing listens at its URL) is given
// up on after --peer-give-up, with the tree failed, its root's error
// naming the shard, and the coordinator's other shard-local tasks
// cancelled.
func TestTreeGivesUpOnMissingShard(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveProc(t, dir, meshEnv, "--db", "sqlite:"+filepath.Join(dir, "db"),
		"--topology", "pattern:http://127.0.0.1:1/%s", "--peer-give-up", "2s")
	q := scimeshv1connect.NewQueueClient(http.DefaultClient, p.URL, withToken("ctok"))
	sub, err := q.Submit(t.Context(), connect.NewRequest(&v1.SubmitRequest{Tasks: []*v1.TaskSpec{
		{Id: "s0:r", Workload: "f", Args: []*v1.Arg{ref("s7:x"), ref("s0:l")}},
		{Id: "s7:x", Workload: "f"},
		{Id: "s0:l", Workload: "f"},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	msg := waitFailed(t, p.URL, sub.Msg.RootId, meshWait)
	if !strings.Contains(msg, `shard "s7" did not answer for `) || !strings.Contains(msg, "http://127.0.0.1:1/s7") {
		t.Errorf("root's error %q does not name the shard and its URL", msg)
	}
	info, err := q.Query(t.Context(), connect.NewRequest(&v1.QueryRequest{TaskId: sub.Msg.Ids["s0:l"]}))
	if err != nil || info.Msg.State != "cancelled" {
		t.Errorf("the tree's other task: %v %v, want cancelled", info, err)
	}
}

// TestPatternShards: a pattern topology restricted by --shards refuses, at
// Submit, a tree that names a shard not listed, with invalid_argument
// naming it, and nothing reaches the host the pattern would make of that
// name; a listed shard is sent its messages as before. An open plain-HTTP
// pattern with --insecure-peers is refused at start, since a client's tree
// would pick the host the peer token goes to in the clear; a list for a
// static topology, or with a name that is no shard name, is refused too.
func TestPatternShards(t *testing.T) {
	t.Parallel()
	proxy := newRecordingProxy(t)
	env := append([]string{"HTTP_PROXY=" + proxy.URL}, meshEnv...)
	topo := "pattern:http://scimesh-%s:8080"
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "db")
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{env, []string{"--topology", topo, "--insecure-peers"}, "refusing --insecure-peers with the plain-HTTP pattern"},
		{append([]string{"SCIMESH_INSECURE_PEERS=true"}, env...), []string{"--topology", topo}, "--shards s0,s1"},
		{env, []string{"--topology", "static:s1=https://h1:8443", "--shards", "s1"}, "is for a pattern: topology"},
		{append([]string{"SCIMESH_SHARDS=s1"}, env...), []string{}, "is for a pattern: topology"},
		{env, []string{"--topology", topo, "--shards", "s1,../x"}, `shard name "../x"`},
		{env, []string{"--topology", topo, "--shards", "s1", "--insecure-peers=false"}, "refusing to send PEER_AUTH_TOKEN to shard s1 over plain HTTP"},
	} {
		s := start(t, dir, c.env, append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db}, c.args...)...)
		select {
		case <-s.Exited():
			err := s.Err()
			if out := s.Stderr.String(); err == nil || !strings.Contains(out, c.want) {
				t.Errorf("serve %q with %q: err %v, output does not say %q:\n%s", c.args, c.env[0], err, c.want, out)
			}
		case <-time.After(30 * time.Second):
			_ = s.Cmd.Process.Kill()
			t.Errorf("serve %q with %q still runs after 30s; want it refused, saying %q", c.args, c.env[0], c.want)
		}
	}

	p := serveProc(t, dir, append([]string{"SCIMESH_SHARDS=s0,s1"}, env...), "--db", db, "--topology", topo, "--insecure-peers")
	q := scimeshv1connect.NewQueueClient(http.DefaultClient, p.URL, withToken("ctok"))
	_, err := q.Submit(t.Context(), connect.NewRequest(&v1.SubmitRequest{Tasks: []*v1.TaskSpec{
		{Id: "s0:r", Workload: "f", Args: []*v1.Arg{ref("s7:x"), val(1)}},
		{Id: "s7:x", Workload: "f"},
	}}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), `shard "s7" is not in this mesh's topology`) {
		t.Fatalf("Submit of a tree naming the unlisted shard s7: %v, want invalid_argument naming it", err)
	}
	if _, err := q.Submit(t.Context(), connect.NewRequest(&v1.SubmitRequest{Tasks: []*v1.TaskSpec{
		{Id: "s0:r", Workload: "f", Args: []*v1.Arg{ref("s1:x"), val(1)}},
		{Id: "s1:x", Workload: "f"},
	}})); err != nil {
		t.Fatalf("Submit of a tree naming the listed shard s1: %v", err)
	}
	for deadline := time.Now().Add(meshWait); ; time.Sleep(50 * time.Millisecond) {
		got := proxy.requests()
		if slices.Contains(got, "scimesh-s1:8080 Bearer ptok") {
			if slices.ContainsFunc(got, func(r string) bool { return strings.Contains(r, "s7") }) {
				t.Fatalf("a request for the unlisted shard s7 left the coordinator: %q", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no message reached the listed shard s1 within %v; the proxy saw %q", meshWait, got)
		}
	}
}
