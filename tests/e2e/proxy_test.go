package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/testenv"
)

// findNginx returns the nginx binary, or skips the test loudly when there
// is none — except under CI, where .ci/run installs it and its absence is
// a failure.
func findNginx(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	testenv.Missing(t, "nginx is not installed (apt-get install nginx; .ci/run does); the reverse-proxy test did not run")
	return ""
}

// nginxConf terminates TLS on listen and forwards to the coordinator at
// upstream in two ways: "/" as a careful operator sets it up (the client's
// Host, X-Forwarded-Proto and X-Forwarded-For), and "/scimesh/" as a
// careless one does — nginx's defaults: the upstream's address as Host,
// no forwarding headers, plain HTTP — under a path prefix. Both must work.
const nginxConf = `daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 256; }
http {
	access_log %[1]s/access.log;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	client_max_body_size 0;
	server {
		listen %[2]s ssl;
		server_name localhost;
		ssl_certificate %[3]s;
		ssl_certificate_key %[4]s;
		proxy_http_version 1.1;
		proxy_request_buffering off;
		proxy_buffering off;
		proxy_read_timeout 120s;
		location / {
			proxy_pass http://%[5]s;
			proxy_set_header Host $host;
			proxy_set_header X-Forwarded-Proto $scheme;
			proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
		}
		location /scimesh/ {
			proxy_pass http://%[5]s/;
		}
	}
}
`

// startNginx runs nginx in front of the coordinator at upstream (host:port)
// with a config and prefix of its own under dir, on a free port, and
// returns its https URL once it answers through to the coordinator.
func startNginx(t *testing.T, nginx, dir, upstream, caFile, certFile, keyFile string) string {
	t.Helper()
	prefix := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeAddr(t)
	conf := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, prefix, addr, certFile, keyFile, upstream), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nginx, "-p", prefix, "-c", conf, "-e", filepath.Join(prefix, "error.log"))
	out := &testenv.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nginx: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(prefix, "error.log"))
			t.Logf("nginx output:\n%s\nnginx error.log:\n%s", out.String(), testenv.LastLines(string(log), 30))
		}
	})
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(caFile)
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("read the test CA: %v", err)
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer hc.CloseIdleConnections()
	base := "https://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := hc.Get(base + "/scimesh/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		select {
		case err := <-done:
			done <- err
			log, _ := os.ReadFile(filepath.Join(prefix, "error.log"))
			t.Fatalf("nginx exited early (%v):\n%s\n%s", err, out.String(), log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx does not answer through to the coordinator after 20 s (last: %v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBehindTLSProxy runs a real coordinator behind a real nginx that
// terminates TLS, and workers and clients that talk only to nginx over
// https, trusting the test's CA: an upload job (POST /upload, then POST
// /jobs over it) completes with the exact result, whether nginx forwards
// the client's Host and scheme or its own defaults under a path prefix.
func TestBehindTLSProxy(t *testing.T) {
	nginx := findNginx(t)
	t.Parallel()
	dir := t.TempDir()
	pki := testenv.NewTLSFiles(t, dir)
	caFile, certFile, keyFile := pki.CA, pki.Cert, pki.Key
	p := serveProc(t, dir, tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "db", "scimesh.db"), "--data-dir", filepath.Join(dir, "data"))
	base := startNginx(t, nginx, dir, strings.TrimPrefix(p.URL, "http://"), caFile, certFile, keyFile)
	trust := "SSL_CERT_FILE=" + caFile // Go's crypto/x509 reads it on Linux

	table := filepath.Join(dir, "table.csv")
	want := writeScoredTable(t, table, 2000, 20)
	for i, coordinator := range []string{base, base + "/scimesh"} {
		t.Logf("through %s", coordinator)
		w := start(t, dir, append(workerEnv(coordinator), trust), "worker", "--id", fmt.Sprintf("proxied-%d", i),
			"--concurrency", "2", "--work-dir", filepath.Join(dir, "work"), "--workload", copyWorkload(""))
		out := filepath.Join(dir, fmt.Sprintf("result-%d.csv", i))
		// The second job is the first again: --no-cache, or the chunk
		// cache would complete it with no worker going through the proxy.
		msg, err := run(t, dir, append(clientEnv(coordinator), trust), "submit", table, "--workload", "copy", "--no-cache",
			"--top-k", "20", "--chunk-rows", "250", "--max-attempts", "1", "--wait", "--output", out)
		if err != nil {
			t.Fatalf("submit --wait through %s: %v\n%s\nworker:\n%s", coordinator, err, msg, testenv.LastLines(w.Stderr.String(), 20))
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("result through %s differs from brute force:\n%s\nwant:\n%s", coordinator, got, want)
		}
		// A refusal reads "POST /tasks/claim: 401 unauthenticated: …"; a
		// bare "401" would match a timestamp's milliseconds.
		if strings.Contains(w.Stderr.String(), " 401 ") || strings.Contains(w.Stderr.String(), "unauthenticated") {
			t.Errorf("the worker behind %s was refused somewhere:\n%s", coordinator, testenv.LastLines(w.Stderr.String(), 20))
		}
		_ = w.Cmd.Process.Kill() // the next round's worker goes the other way
		w.Wait()
	}
	access, err := os.ReadFile(filepath.Join(dir, "nginx", "access.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []string{`"POST /upload `, `"POST /jobs `, `"POST /tasks/claim `, `/input HTTP/1.1" 200`,
		`"POST /scimesh/upload `, `"POST /scimesh/tasks/claim `, `"GET /scimesh/tasks/`} {
		if !strings.Contains(string(access), req) {
			t.Errorf("nginx's access log has no %s: the processes did not all go through the proxy\n%s", req, testenv.LastLines(string(access), 20))
		}
	}
}
