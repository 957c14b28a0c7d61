package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// StartPprof serves net/http/pprof on addr, a listener of its own and not
// the API's port, until stop closes it (and waits for it). Profiles
// show the server's code and its callers' data (a goroutine dump holds
// request values), and a CPU profile costs the process while it runs, so
// addr must be loopback: reach it from elsewhere through an SSH tunnel.
func StartPprof(addr string, log *slog.Logger) (stop func(), err error) {
	if !IsLoopback(addr) {
		return nil, fmt.Errorf("refusing --pprof %s: profiles would be open to anyone who can reach it; "+
			"use a loopback address such as 127.0.0.1:6060 (and an SSH tunnel to read it from elsewhere)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// No write timeout: a CPU profile or a trace answers after its seconds.
	// Only to requests for a loopback name, as the API without tokens.
	h := LoopbackHosts(mux, "profiles answer only requests to localhost or 127.0.0.1")
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof listener stopped", "err", err)
		}
	}()
	log.Info("serving pprof", "addr", ln.Addr().String())
	return func() { _ = hs.Close(); <-done }, nil
}
