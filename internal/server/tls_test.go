package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/testenv"
	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
)

// TestTLS: with a certificate, the server answers REST, Connect and gRPC
// over TLS on its one port, HTTP/2 chosen by ALPN, to a client that
// trusts the certificate's authority; a client that does not is refused
// the handshake; and a server without tokens still answers only requests
// addressed to loopback.
func TestTLS(t *testing.T) {
	t.Parallel()
	files := testenv.NewTLSFiles(t, t.TempDir())
	cfg := testConfig(t)
	cfg.TLSCert, cfg.TLSKey = files.Cert, files.Key
	srv, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.URL(), "https://127.0.0.1:") {
		t.Fatalf("URL %s, want https://127.0.0.1:PORT", srv.URL())
	}
	ctx, cancel := context.WithCancel(t.Context())
	wait := srv.Start(ctx)
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: files.Pool}, ForceAttemptHTTP2: true}
	hc := &http.Client{Transport: transport}
	defer func() {
		transport.CloseIdleConnections()
		cancel()
		if err := wait(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	resp, err := hc.Get(srv.URL() + "/health")
	if err != nil {
		t.Fatalf("GET /health over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 || resp.TLS == nil {
		t.Fatalf("GET /health: %d over %s (TLS %v); want 200 over HTTP/2 with TLS", resp.StatusCode, resp.Proto, resp.TLS != nil)
	}
	cl := client.New(srv.URL(), "", client.WithHTTPClient(hc))
	if up, err := cl.Upload(t.Context(), strings.NewReader("id,x\na,1\n")); err != nil || up.Rows != 2 {
		t.Fatalf("upload over TLS: %+v, %v", up, err)
	}
	for name, opt := range map[string]connect.ClientOption{"gRPC": connect.WithGRPC(), "Connect": connect.WithProtoJSON()} {
		q := scimeshv1connect.NewQueueClient(hc, srv.URL(), opt)
		_, err := q.Query(t.Context(), connect.NewRequest(&v1.QueryRequest{TaskId: "s0:none"}))
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("%s Query over TLS: %v, want NotFound from the service", name, err)
		}
	}

	req, _ := http.NewRequest("GET", srv.URL()+"/health", nil)
	req.Host = "rebound.example"
	if resp, err := hc.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a request for another host to a server without tokens: %v, %v; want 421", resp, err)
	} else {
		resp.Body.Close()
	}

	untrusting := &http.Transport{} // the system's authorities, not the test's
	defer untrusting.CloseIdleConnections()
	_, err = (&http.Client{Transport: untrusting}).Get(srv.URL() + "/health")
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("a client that does not trust the authority: %v, want x509.UnknownAuthorityError", err)
	}
}

// TestTLSRefused: a certificate without its key, or the other way round,
// a file that cannot be read and a key that is not the certificate's stop
// New with an error that says so, before it creates a database.
func TestTLSRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := testenv.NewTLSFiles(t, dir)
	other := testenv.NewTLSFiles(t, t.TempDir())
	text := filepath.Join(dir, "text.pem")
	if err := os.WriteFile(text, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, cert, key, want string
	}{
		{"cert alone", files.Cert, "", "give both --tls-cert and --tls-key"},
		{"key alone", "", files.Key, "give both --tls-cert and --tls-key"},
		{"missing cert", filepath.Join(dir, "none.pem"), files.Key, "none.pem: no such file or directory"},
		{"not PEM", text, files.Key, "failed to find any PEM data in certificate input"},
		{"another key", files.Cert, other.Key, "private key does not match public key"},
		{"key as cert", files.Key, files.Key, "TLS certificate " + files.Key},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.TLSCert, cfg.TLSKey = c.cert, c.key
			srv, err := New(t.Context(), cfg)
			if err == nil {
				srv.Close()
				t.Fatalf("New with cert %q and key %q succeeded", c.cert, c.key)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("New: %v; want it to say %q", err, c.want)
			}
			if _, err := os.Stat(strings.TrimPrefix(cfg.DB, "sqlite:")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused server created its database: %v", err)
			}
		})
	}
}
