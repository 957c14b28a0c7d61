package rpc_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"connectrpc.com/connect"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/rpc"
	"github.com/scimesh/scimesh/internal/store/sqlite"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
)

const (
	clientToken = "ctok"
	workerToken = "wtok"
)

// bundle is a real shard s0 (SQLite, engine, the services mounted as serve
// mounts them, over a listener that speaks HTTP/2 without TLS) and gRPC
// clients of its Queue and Worker services, as a test gets them.
type bundle struct {
	engine *engine.Engine
	queue  scimeshv1connect.QueueClient  // with the client token
	worker scimeshv1connect.WorkerClient // with the worker token
}

func setup(t *testing.T) *bundle {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "scimesh.db"))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng := engine.New(st, engine.Config{Shard: "s0", Logger: log})
	mux := http.NewServeMux()
	gate := auth.NewGate(auth.Tokens{Worker: workerToken, Client: clientToken, Peer: "ptok"})
	rpc.Mount(mux, eng, gate, func(shard string) bool { return shard == "s0" }, log)
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	hc := rpc.H2CClient()
	t.Cleanup(func() {
		hc.CloseIdleConnections()
		srv.Close()
		st.Close()
	})
	return &bundle{
		engine: eng,
		queue:  scimeshv1connect.NewQueueClient(hc, srv.URL, connect.WithGRPC(), connect.WithInterceptors(rpc.Bearer(clientToken))),
		worker: scimeshv1connect.NewWorkerClient(hc, srv.URL, connect.WithGRPC(), connect.WithInterceptors(rpc.Bearer(workerToken))),
	}
}
