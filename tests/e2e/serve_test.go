package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/scimesh/scimesh/internal/pgcluster"
	"github.com/scimesh/scimesh/internal/testenv"
	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
	"github.com/scimesh/scimesh/tests/framework/binary"
)

// alive polls url until it answers 200, failing t when p exits first or
// after 30 s.
func alive(t *testing.T, p *binary.Proc, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := binary.ReadyClient.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case <-p.Exited():
			err := p.Err()
			t.Fatalf("serve exited (%v) instead of answering %s:\n%s", err, url, p.Stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer 200 after 30s:\n%s", url, p.Stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exited waits up to d for p to end and returns how: nil for status 0.
func exited(t *testing.T, p *binary.Proc, d time.Duration) error {
	t.Helper()
	select {
	case <-p.Exited():
		err := p.Err()
		return err
	case <-time.After(d):
		t.Fatalf("serve still runs %v later:\n%s", d, p.Stderr.String())
		return nil
	}
}

// triesRe reads how many tries the database took once it answered.
var triesRe = regexp.MustCompile(`msg="the database answers" tries=(\d+)`)

// TestServeWaitsForDatabase starts two coordinators on a PostgreSQL server
// that is not up yet (as a replica restarted during a database restart or
// failover finds it): one with --migrate, one without on a database whose
// schema was never migrated. Both stay up meanwhile, answering /health
// with 200, /ready with 503, an API call without a token with 401 and one
// with the client token with 503 unavailable and Retry-After. Once the
// server starts, the first migrates and serves a job through to its
// stitched result, having logged the refusal once however often it
// tried; the second exits with the schema error, as at a start with the
// database up.
func TestServeWaitsForDatabase(t *testing.T) {
	t.Parallel()
	dbAddr := testenv.FreeAddr(t)
	_, portText, _ := net.SplitHostPort(dbAddr)
	port, _ := strconv.Atoi(portText)
	dbURL := func(name string) string {
		return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", dbAddr, name)
	}
	dir := t.TempDir()
	addr, behindAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	p := start(t, dir, tokenEnv, "serve", "--addr", addr, "--db", dbURL("postgres"), "--migrate", "--data-dir", dir+"/a")
	// template1 exists on every new cluster and is never migrated.
	behind := start(t, dir, tokenEnv, "serve", "--addr", behindAddr, "--db", dbURL("template1"), "--data-dir", dir+"/b")
	url := "http://" + addr
	alive(t, p, url+"/health")
	alive(t, behind, "http://"+behindAddr+"/health")

	var e struct{ Error struct{ Code string } }
	if s := call(t, "GET", url+"/ready", "", nil, &e); s != 503 || e.Error.Code != "unavailable" {
		t.Errorf("GET /ready while the database is down: %d %q, want 503 unavailable", s, e.Error.Code)
	}
	if s := call(t, "GET", url+"/jobs", "", nil, nil); s != 401 {
		t.Errorf("GET /jobs without a token while the database is down: %d, want 401", s)
	}
	req, _ := http.NewRequest("GET", url+"/jobs", nil)
	req.Header.Set("Authorization", "Bearer ctok")
	resp, err := binary.ReadyClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	e.Error.Code = ""
	err = jsonDecode(resp.Body, &e)
	resp.Body.Close()
	if resp.StatusCode != 503 || e.Error.Code != "unavailable" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("GET /jobs with the client token while the database is down: %d %q (%v), Retry-After %q; want 503 unavailable with Retry-After",
			resp.StatusCode, e.Error.Code, err, resp.Header.Get("Retry-After"))
	}
	time.Sleep(1500 * time.Millisecond) // several tries fail meanwhile
	for _, q := range []*binary.Proc{p, behind} {
		select {
		case <-q.Exited():
			err := q.Err()
			t.Fatalf("serve exited while the database was down (%v):\n%s", err, q.Stderr.String())
		default:
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{Dir: pgcluster.RAMDir(), Port: port})
	if errors.Is(err, pgcluster.ErrNoServer) {
		testenv.Missing(t, "NO POSTGRESQL: "+err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Stop() })

	alive(t, p, url+"/ready")
	if err := exited(t, behind, 30*time.Second); err == nil || !strings.Contains(behind.Stderr.String(), "scimesh migrate up") {
		t.Errorf("serve without --migrate on a schema never migrated, once the database answered: %v, want exit 1 saying to migrate:\n%s",
			err, behind.Stderr.String())
	}

	var j jobOut
	if s := call(t, "POST", url+"/jobs", "ctok", map[string]any{"workload": "w", "top_k": 2, "input": map[string]any{"chunks": chunkList(3)}}, &j); s != 201 {
		t.Fatalf("create a job once the database answers: %d", s)
	}
	var list struct{ Jobs []jobOut }
	if s := call(t, "GET", url+"/jobs", "ctok", nil, &list); s != 200 || len(list.Jobs) != 1 || list.Jobs[0].JobID != j.JobID {
		t.Fatalf("list jobs: %d %+v, want the job %s", s, list.Jobs, j.JobID)
	}
	for range 3 {
		var tk taskOut
		if s := call(t, "POST", url+"/tasks/claim", "wtok", map[string]any{"worker_id": "w1"}, &tk); s != 200 {
			t.Fatalf("claim: %d", s)
		}
		out := fmt.Sprintf("id,score\nr%d,%d\n", tk.ChunkIndex, tk.ChunkIndex)
		if s := call(t, "POST", url+"/tasks/"+tk.TaskID+"/result", "wtok", map[string]any{"worker_id": "w1", "attempt": tk.Attempt, "output": out}, nil); s != 200 {
			t.Fatalf("result of %s: %d", tk.TaskID, s)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for call(t, "GET", url+"/jobs/"+j.JobID, "ctok", nil, &j); j.Status != "completed"; call(t, "GET", url+"/jobs/"+j.JobID, "ctok", nil, &j) {
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s 30s after its chunks completed; the stitcher does not run", j.JobID, j.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}

	log := p.Stderr.String()
	m := triesRe.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no line says the database answers:\n%s", log)
	}
	if tries, _ := strconv.Atoi(m[1]); tries < 3 {
		t.Errorf("the database answered at try %d; the test meant it to be refused several times first", tries)
	}
	if n := strings.Count(log, "connection refused"); n != 1 {
		t.Errorf("the refusal is logged %d times, want once:\n%s", n, log)
	}
}

// TestServeStopsWhileWaitingForDatabase: SIGTERM to a coordinator still
// waiting for its database ends it at once, with status 0.
func TestServeStopsWhileWaitingForDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := testenv.FreeAddr(t)
	db := fmt.Sprintf("postgres://postgres@%s/scimesh?sslmode=disable", testenv.FreeAddr(t)) // nothing listens there
	p := start(t, dir, tokenEnv, "serve", "--addr", addr, "--db", db, "--data-dir", dir+"/data")
	alive(t, p, "http://"+addr+"/health")
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := exited(t, p, 5*time.Second); err != nil {
		t.Errorf("serve ended by SIGTERM while waiting for its database: %v, want status 0:\n%s", err, p.Stderr.String())
	}
}

// TestServeTLS runs `serve` with a certificate of a private authority as a
// real process: a worker and the CLI that trust the authority through
// SSL_CERT_FILE complete a job over HTTPS; on the same port, grpc-go
// submits a tree over TLS, the worker runs it through the Worker service,
// and connect-go's Connect protocol reads its result; the CLI without the
// authority is refused with a certificate error. serve refuses at start a
// certificate without its key and a key that is not the certificate's.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := testenv.NewTLSFiles(t, dir)
	other := testenv.NewTLSFiles(t, t.TempDir())
	db := "sqlite:" + filepath.Join(dir, "scimesh.db")
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--tls-cert", files.Cert}, "give both --tls-cert and --tls-key"},
		{[]string{"SCIMESH_TLS_KEY=" + files.Key}, nil, "give both --tls-cert and --tls-key"},
		{nil, []string{"--tls-cert", files.Cert, "--tls-key", other.Key}, "private key does not match public key"},
		{nil, []string{"--tls-cert", filepath.Join(dir, "none.pem"), "--tls-key", files.Key}, "none.pem: no such file or directory"},
	} {
		out, err := run(t, dir, append(tokenEnv, c.env...), append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db}, c.args...)...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("serve %v %v: %v\n%s\nwant it to say %q", c.env, c.args, err, out, c.want)
		}
	}
	if fileExists(filepath.Join(dir, "scimesh.db")) {
		t.Fatal("a refused serve created its database")
	}

	trusting := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: files.Pool}, ForceAttemptHTTP2: true}
	defer trusting.CloseIdleConnections()
	hc := &http.Client{Transport: trusting, Timeout: 30 * time.Second}
	p := binary.Serve(t, hc, scimesh, dir, "127.0.0.1:0", append(tokenEnv, "SCIMESH_TLS_CERT="+files.Cert, "SCIMESH_TLS_KEY="+files.Key),
		"--db", db, "--data-dir", filepath.Join(dir, "data"))
	if !strings.HasPrefix(p.URL, "https://127.0.0.1:") {
		t.Fatalf("serve with TLS logged the URL %s, want https://127.0.0.1:PORT", p.URL)
	}
	trust := "SSL_CERT_FILE=" + files.CA
	start(t, dir, append(workerEnv(p.URL), trust), "worker", "--id", "w", "--concurrency", "2", "--tree-concurrency", "1",
		"--work-dir", filepath.Join(dir, "work"), "--workload", copyWorkload(""), "--workload", `num=tr -d '[] \n'`)

	table := filepath.Join(dir, "table.csv")
	want := writeScoredTable(t, table, 500, 9)
	out := filepath.Join(dir, "result.csv")
	if msg, err := run(t, dir, append(clientEnv(p.URL), trust), "submit", table, "--workload", "copy", "--top-k", "9",
		"--chunk-rows", "100", "--wait", "--output", out); err != nil {
		t.Fatalf("submit --wait over TLS: %v\n%s", err, msg)
	}
	if got, _ := os.ReadFile(out); string(got) != want {
		t.Fatalf("result over TLS:\n%s\nwant:\n%s", got, want)
	}

	conn, err := grpc.NewClient(strings.TrimPrefix(p.URL, "https://"), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: files.Pool})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var sub v1.SubmitResponse
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer ctok")
	if err := conn.Invoke(ctx, scimeshv1connect.QueueSubmitProcedure, &v1.SubmitRequest{Tasks: []*v1.TaskSpec{
		{Id: "s0:n", Workload: "num", Args: []*v1.Arg{val(42)}},
	}}, &sub); err != nil {
		t.Fatalf("grpc-go Submit over TLS: %v", err)
	}
	q := scimeshv1connect.NewQueueClient(hc, p.URL, connect.WithProtoJSON(), withToken("ctok"))
	var info *v1.TaskInfo
	workerWaitFor(t, 30*time.Second, "the worker to run the tree's task", func() bool {
		res, err := q.Query(t.Context(), connect.NewRequest(&v1.QueryRequest{TaskId: sub.RootId}))
		if err != nil {
			t.Fatalf("Connect Query over TLS: %v", err)
		}
		info = res.Msg
		return info.State == "completed"
	})
	if info.Result.GetNumberValue() != 42 {
		t.Fatalf("the tree's result is %v, want 42", info.Result)
	}

	stdout, stderr, err := cli(t, dir, p.URL, "ctok", "status", "s0:x")
	if err == nil || !strings.Contains(stderr, "certificate signed by unknown authority") || !strings.Contains(stderr, "SSL_CERT_FILE") {
		t.Errorf("the CLI without the authority: %v\nstdout %q\nstderr %s\nwant a certificate error that names SSL_CERT_FILE", err, stdout, stderr)
	}
}

// TestServeSurvivesKill runs a job part way on SQLite, kills the coordinator
// with SIGKILL, restarts it and finishes the job: nothing accepted is lost,
// and the lease held across the restart is still the worker's.
func TestServeSurvivesKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "data", "scimesh.db")
	p := serveProc(t, dir, tokenEnv, "--db", db)
	var j jobOut
	if s := call(t, "POST", p.URL+"/jobs", "ctok", map[string]any{"workload": "w", "top_k": 1, "input": map[string]any{"chunks": chunkList(2)}}, &j); s != 201 {
		t.Fatalf("create job: %d", s)
	}
	var t0, t1 taskOut
	call(t, "POST", p.URL+"/tasks/claim", "wtok", map[string]any{"worker_id": "w1"}, &t0)
	if s := call(t, "POST", p.URL+"/tasks/"+t0.TaskID+"/result", "wtok", map[string]any{"worker_id": "w1", "attempt": 1, "output": "id,score\na,1\n"}, nil); s != 200 {
		t.Fatalf("result: %d", s)
	}
	call(t, "POST", p.URL+"/tasks/claim", "wtok", map[string]any{"worker_id": "w1"}, &t1)

	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	p = serveProc(t, dir, tokenEnv, "--db", db)

	if s := call(t, "POST", p.URL+"/tasks/"+t1.TaskID+"/heartbeat", "wtok", map[string]any{"worker_id": "w1", "attempt": 1}, nil); s != 200 {
		t.Fatalf("heartbeat of a lease held across the restart: %d", s)
	}
	if s := call(t, "POST", p.URL+"/tasks/"+t1.TaskID+"/result", "wtok", map[string]any{"worker_id": "w1", "attempt": 1, "output": "id,score\nb,2\n"}, nil); s != 200 {
		t.Fatalf("result after restart: %d", s)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var got jobOut
		call(t, "GET", p.URL+"/jobs/"+j.JobID, "ctok", nil, &got)
		if got.Status == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job is %s after restart, want completed", got.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := http.NewRequest("GET", p.URL+"/jobs/"+j.JobID+"/result", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Header.Set("Authorization", "Bearer ctok")
	r, err := http.DefaultClient.Do(resp)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if string(body) != "id,score\nb,2\n" {
		t.Fatalf("result %q", body)
	}
}

func TestServeRefusesOpenNonLoopback(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, err := run(t, dir, []string{"WORKER_AUTH_TOKEN=only-one"}, "serve", "--addr", "0.0.0.0:0", "--db", "sqlite:"+filepath.Join(dir, "db"))
	if err == nil || !strings.Contains(out, "refusing to listen on 0.0.0.0:0 without tokens") || !strings.Contains(out, "CLIENT_AUTH_TOKEN") {
		t.Fatalf("serve on 0.0.0.0 without tokens: err %v, output:\n%s", err, out)
	}
	if _, statErr := os.Stat(filepath.Join(dir, "db")); statErr == nil {
		t.Fatal("the refused serve created its database")
	}
	// With a topology, the peers' service needs its token too.
	out, err = run(t, dir, tokenEnv, "serve", "--addr", "0.0.0.0:0", "--db", "sqlite:"+filepath.Join(dir, "db"),
		"--topology", "static:s1=http://h1:8080")
	if err == nil || !strings.Contains(out, "without PEER_AUTH_TOKEN") {
		t.Fatalf("serve on 0.0.0.0 with a topology and no peer token: err %v, output:\n%s", err, out)
	}
	// Two roles with one token: either could act as the other.
	out, err = run(t, dir, []string{"WORKER_AUTH_TOKEN=same-token-0123456789", "CLIENT_AUTH_TOKEN=same-token-0123456789"},
		"serve", "--db", "sqlite:"+filepath.Join(dir, "same.db"))
	if err == nil || !strings.Contains(out, "CLIENT_AUTH_TOKEN and WORKER_AUTH_TOKEN are the same token") {
		t.Fatalf("serve with equal tokens: err %v, output:\n%s", err, out)
	}
	// An empty data directory would leave nowhere for uploads.
	out, err = run(t, dir, tokenEnv, "serve", "--data-dir", "", "--db", "sqlite:"+filepath.Join(dir, "nodata.db"))
	if err == nil || !strings.Contains(out, "--data-dir is empty") {
		t.Fatalf("serve with an empty --data-dir: err %v, output:\n%s", err, out)
	}
	// Without a topology it starts, and its peers' service admits no one;
	// on loopback too, once it checks other tokens.
	for _, addr := range []string{"0.0.0.0:0", "127.0.0.1:0"} {
		p := serveOn(t, dir, addr, tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "open.db"))
		for _, token := range []string{"", "ctok", "anything"} {
			in := scimeshv1connect.NewInternalClient(http.DefaultClient, p.URL, withToken(token))
			_, err := in.SetCancel(t.Context(), connect.NewRequest(&v1.SetCancelRequest{TaskId: "s0:x"}))
			if code := connect.CodeOf(err); code != connect.CodeUnauthenticated && code != connect.CodePermissionDenied {
				t.Errorf("Internal call with token %q on %s without a peer token: %v, want refused", token, addr, err)
			}
		}
		_ = p.Cmd.Process.Kill()
		// Short tokens are warned about, in one line naming them.
		if n := strings.Count(p.Stderr.String(), "weak tokens"); n != 1 || !strings.Contains(p.Stderr.String(), "tokens=CLIENT_AUTH_TOKEN,WORKER_AUTH_TOKEN") {
			t.Errorf("serve with 4-byte tokens logged %d weak-token lines:\n%s", n, p.Stderr.String())
		}
	}
}

// TestOpenServerAnswersLoopbackNamesOnly: a coordinator without tokens
// refuses requests addressed to any other host name (DNS rebinding).
func TestOpenServerAnswersLoopbackNamesOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveProc(t, dir, nil, "--db", "sqlite:"+filepath.Join(dir, "open.db"))
	for host, want := range map[string]int{"evil.example": 421, "evil.example:8080": 421, "10.1.2.3": 421,
		"localhost": 200, strings.TrimPrefix(p.URL, "http://"): 200, "[::1]:9": 200} {
		req, _ := http.NewRequest("GET", p.URL+"/jobs", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /jobs with Host %q: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// TestServeLogLevel: --log-level quiets the request lines, and a level
// that does not exist is refused with the ones that do.
func TestServeLogLevel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveOn(t, dir, testenv.FreeAddr(t), tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "q.db"), "--log-level", "warn")
	if s := call(t, "GET", p.URL+"/jobs", "ctok", nil, nil); s != 200 {
		t.Fatalf("GET /jobs: %d", s)
	}
	time.Sleep(100 * time.Millisecond)
	if strings.Contains(p.Stderr.String(), "msg=request") {
		t.Fatalf("a request line was logged at --log-level warn:\n%s", p.Stderr.String())
	}
	out, err := run(t, dir, tokenEnv, "serve", "--db", "sqlite:"+filepath.Join(dir, "r.db"), "--log-level", "loud")
	if err == nil || !strings.Contains(out, "use debug, info, warn or error") {
		t.Fatalf("serve --log-level loud: %v\n%s", err, out)
	}
}
