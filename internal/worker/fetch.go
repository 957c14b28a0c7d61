package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/scimesh/scimesh/internal/client"
)

// DefaultMaxInputBytes bounds a chunk whose size the task does not give
// (input.bytes 0): 16 GiB.
const DefaultMaxInputBytes int64 = 16 << 30

// maxRedirects bounds the redirects of a hosted input.
const maxRedirects = 10

// fetcher downloads hosted inputs: a task's input.url that is not on the
// coordinator. It never sends the worker token, uses no HTTP proxy (the
// rules must see the address really dialled), and checks every connection,
// redirects' included, against the operator's host rules.
type fetcher struct {
	hc        *http.Client
	userAgent string
}

func newFetcher(policy *hostPolicy, userAgent string) *fetcher {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           policy.dialContext(dialer),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
	}
	hc := &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		// The new host is checked when its connection is dialled.
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return fmt.Errorf("redirected to %s: only http and https inputs can be downloaded", redact(req.URL))
		}
		return nil
	}}
	return &fetcher{hc: hc, userAgent: userAgent}
}

// get downloads rawURL and returns its body for the caller to read and
// close. A refused host is a permanent error naming the host and the flag
// that allows it.
func (f *fetcher) get(ctx context.Context, rawURL string) (io.ReadCloser, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, Permanent(fmt.Errorf("the input URL %q: %w", rawURL, err))
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, Permanent(fmt.Errorf("the input URL %s: only absolute http and https URLs can be downloaded", redact(u)))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", redact(u), err)
	}
	req.Header.Set("User-Agent", f.userAgent)
	resp, err := f.hc.Do(req)
	if err != nil {
		var refused *hostRefusedError
		if errors.As(err, &refused) {
			return nil, Permanent(fmt.Errorf("GET %s: %w", redact(u), refused))
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("GET %s: %w", redact(u), err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: the server answered %s", redact(resp.Request.URL), resp.Status)
	}
	return resp.Body, nil
}

// close closes the idle connections.
func (f *fetcher) close() { f.hc.CloseIdleConnections() }

// redact shows u without its query and user info, which may hold
// credentials (a pre-signed URL's signature, say).
func redact(u *url.URL) string {
	v := *u
	v.User, v.RawQuery, v.Fragment = nil, "", ""
	return v.String()
}

// openInput starts the download of t's input: from the coordinator with
// the worker token when input.url is on the coordinator's own scheme and
// host (always allowed), else as a hosted input, without the token and
// within the operator's host rules.
func (w *Worker) openInput(ctx context.Context, t *client.Task) (io.ReadCloser, error) {
	if w.client.OnCoordinator(t.Input.URL) {
		return w.client.Input(ctx, t.Input.URL)
	}
	return w.fetch.get(ctx, t.Input.URL)
}
