package server

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"time"

	"connectrpc.com/grpchealth"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/httpapi"
	"github.com/scimesh/scimesh/internal/rpc"
	"github.com/scimesh/scimesh/internal/store"
)

// A coordinator whose PostgreSQL database does not answer at start (a
// replica restarted during a database restart or failover) does not exit:
// it listens, answers /health, says 503 to everything that needs the
// database, and opens the store once the database answers. Without that, a
// replica that came back at the wrong moment would stay gone.

// The tries at the database back off from retryMin to retryMax, each wait
// a random part of it (from half to all), so that replicas do not try in
// step.
const (
	retryMin = 100 * time.Millisecond
	retryMax = 5 * time.Second
)

// awaitStore opens the store once the database answers, trying again with
// backoff, and serves the API on it from then on. A failure is logged when
// it differs from the one before, not at every try. An error that is not
// the database's absence — a schema behind this program's, a database
// that does not exist, a password refused — ends the wait at once: the
// database answered, and what it said is for the operator to fix. It
// returns ctx's error when ctx ends first.
func (s *Server) awaitStore(ctx context.Context) error {
	start, last, delay := time.Now(), s.down.Error(), retryMin
	for tries := 2; ; tries++ { // New made the first
		t := time.NewTimer(time.Duration(float64(delay) * (0.5 + rand.Float64()/2)))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, retryMax)
		st, err := s.openStore(ctx)
		if err == nil {
			if err := s.serveStore(st); err != nil {
				st.Close()
				return err
			}
			s.log.Info("the database answers", "tries", tries, "waited", time.Since(start).Round(time.Millisecond))
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, store.ErrUnavailable) {
			return err
		}
		if msg := err.Error(); msg != last {
			s.log.Warn("the database still does not answer; trying again", "error", err)
			last = msg
		}
	}
}

// waiting is what the listener serves until the database answers. /health
// answers as ever (the process is alive) and /metrics with what the
// process knows; /ready and gRPC health, which anyone may ask, are 503
// unavailable. Every other request is 503 unavailable to a caller the
// gate knows — in the REST API's error form or the RPC protocols' — and
// 401 to anyone else, as the API would answer them. Nothing is read of a
// body, and the connection that brought one is let go, as the gate does.
func (s *Server) waiting() http.Handler {
	down := &auth.Error{Status: http.StatusServiceUnavailable, Code: "unavailable",
		Message: "the database has not answered since this coordinator started; retry later"}
	answer := func(identify bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			deny := httpapi.Deny
			if rpc.Serves(r) {
				deny = rpc.Deny
			}
			if r.ContentLength != 0 {
				auth.LetGo(w, r) // nothing of the body is read
			}
			if identify {
				if e := s.gate.Identify(r); e != nil {
					deny(w, r, e)
					return
				}
			}
			deny(w, r, down)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", httpapi.Health)
	mux.Handle("GET /metrics", s.metrics.Handler())
	mux.Handle("GET /ready", answer(false))
	mux.Handle("/"+grpchealth.HealthV1ServiceName+"/", answer(false))
	mux.Handle("/", answer(true))
	return mux
}
