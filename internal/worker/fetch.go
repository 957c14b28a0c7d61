package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/scimesh/scimesh/internal/client"
)

// DefaultMaxInputBytes bounds a chunk, whether its task gives its size
// (input.bytes) or not: 16 GiB.
const DefaultMaxInputBytes int64 = 16 << 30

// maxRedirects bounds the redirects of a hosted input.
const maxRedirects = 10

// fetcher downloads the inputs that are not on the coordinator: hosted
// inputs (a job's input.chunks URIs) and signed ones (a chunk read
// straight from the coordinators' blob store). It never sends the worker
// token and uses no HTTP proxy. A hosted input's every connection,
// redirects' included, is checked against the operator's host rules (which
// must see the address really dialled); a signed input is exempt, since
// the coordinator the worker trusts with its token signed it for its own
// store, and follows no redirect.
type fetcher struct {
	hc        *http.Client // hosted inputs, within the host rules
	signed    *http.Client // signed inputs
	userAgent string
}

func newFetcher(policy *hostPolicy, userAgent string) *fetcher {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	transport := func(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
		return &http.Transport{
			Proxy:                 nil,
			DialContext:           dial,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          64,
			MaxIdleConnsPerHost:   8,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
			ResponseHeaderTimeout: 60 * time.Second,
		}
	}
	hc := &http.Client{Transport: transport(policy.dialContext(dialer)), CheckRedirect: func(req *http.Request, via []*http.Request) error {
		// The new host is checked when its connection is dialled.
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return fmt.Errorf("redirected to %s: only http and https inputs can be downloaded", client.RedactURL(req.URL))
		}
		return nil
	}}
	signed := &http.Client{Transport: transport(dialer.DialContext), CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		return fmt.Errorf("the blob store redirected a signed input to %s: signed inputs are not redirected", client.RedactURL(req.URL))
	}}
	return &fetcher{hc: hc, signed: signed, userAgent: userAgent}
}

// get downloads rawURL and returns its body for the caller to read and
// close. A refused host is a permanent error naming the host and the flag
// that allows it.
func (f *fetcher) get(ctx context.Context, rawURL string) (io.ReadCloser, error) {
	return f.do(ctx, f.hc, rawURL, "", 0)
}

// getRange downloads the byte range rng ("bytes=FIRST-LAST") of the
// signed URL rawURL, which must answer with that range (206).
func (f *fetcher) getRange(ctx context.Context, rawURL, rng string) (io.ReadCloser, error) {
	return f.do(ctx, f.signed, rawURL, rng, http.StatusPartialContent)
}

// do GETs rawURL with hc, with the Range header rng when set, and takes
// an answer of status want, or of any 2xx when want is 0.
func (f *fetcher) do(ctx context.Context, hc *http.Client, rawURL, rng string, want int) (io.ReadCloser, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// Its error would quote the URL, which may hold a signature.
		return nil, Permanent(errors.New("the input URL does not parse as a URL"))
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, Permanent(fmt.Errorf("the input URL %s: only absolute http and https URLs can be downloaded", client.RedactURL(u)))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", client.RedactURL(u), err)
	}
	req.Header.Set("User-Agent", f.userAgent)
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	resp, err := hc.Do(req)
	if err != nil {
		var refused *hostRefusedError
		if errors.As(err, &refused) {
			return nil, Permanent(fmt.Errorf("GET %s: %w", client.RedactURL(u), refused))
		}
		// A *url.Error quotes the whole URL, a signature included.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("GET %s: %w", client.RedactURL(u), err)
	}
	switch {
	case resp.StatusCode == want, want == 0 && resp.StatusCode >= 200 && resp.StatusCode <= 299:
		return resp.Body, nil
	case rng != "" && resp.StatusCode == http.StatusOK:
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s (Range %s): the store answered the whole object (200), not the range: it does not honour Range requests", client.RedactURL(u), rng)
	}
	resp.Body.Close()
	if rng != "" && resp.StatusCode == http.StatusForbidden {
		return nil, fmt.Errorf("GET %s: the store answered %s: the signed URL expired or does not match (is this worker's clock right?)", client.RedactURL(u), resp.Status)
	}
	return nil, fmt.Errorf("GET %s: the server answered %s", client.RedactURL(resp.Request.URL), resp.Status)
}

// close closes the idle connections.
func (f *fetcher) close() { f.hc.CloseIdleConnections() }

// redactRaw is the URL rawURL without its query and user info, for a log.
func redactRaw(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return client.RedactURL(u)
}

// hosted reports whether t's input is a hosted input: neither a signed
// input nor one on the coordinator.
func (w *Worker) hosted(t *client.Task) bool {
	return t.Input.Range == "" && !w.client.OnCoordinator(t.Input.URL)
}

// openInput starts the download of t's input: a signed input straight
// from the blob store, its header line first; from the coordinator with
// the worker token when input.url is the URL the coordinator issues for
// a task's input (client.OnCoordinator; always allowed); else — on
// another host, or on the coordinator's host outside its base path — as a
// hosted input, without the token and within the operator's host rules.
func (w *Worker) openInput(ctx context.Context, t *client.Task) (io.ReadCloser, error) {
	switch {
	case t.Input.Range != "":
		body, err := w.fetch.getRange(ctx, t.Input.URL, t.Input.Range)
		if err != nil {
			return nil, err
		}
		return struct {
			io.Reader
			io.Closer
		}{io.MultiReader(strings.NewReader(t.Input.HeaderLine), body), body}, nil
	case w.client.OnCoordinator(t.Input.URL):
		return w.client.Input(ctx, t.Input.URL)
	}
	return w.fetch.get(ctx, t.Input.URL)
}
