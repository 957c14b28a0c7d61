package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	// The API's bodies go through segmentio/encoding/json, encoding/json's
	// API and behaviour at a fraction of its CPU (bench/NOTES.md).
	"github.com/segmentio/encoding/json"

	"github.com/scimesh/scimesh/internal/topology"
)

// DefaultTimeout bounds a JSON call (connect, send, answer read whole). A
// long-polling claim gets its wait on top. Streaming calls (Upload, Input,
// Result, Logs) are bounded by their context only, since their bodies may
// be large or, when following logs, open-ended.
const DefaultTimeout = 60 * time.Second

// Client calls the REST API of one coordinator. Make it with New; it is safe
// for concurrent use.
type Client struct {
	base      *url.URL
	baseErr   error // why the base URL is unusable; every call returns it
	token     string
	hc        *http.Client
	timeout   time.Duration
	userAgent string

	warn      func(msg string) // WithWarn's; nil: none
	plainWarn sync.Once        // the warning that the token goes in the clear, once
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests with hc instead of its
// own keep-alive client. The Client uses a shallow copy of hc whose
// CheckRedirect first drops the bearer token from any redirect that leaves
// the coordinator's base URL, then defers to hc's own CheckRedirect.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		cp := *hc
		c.hc = &cp
	}
}

// WithTimeout sets the bound of JSON calls (DefaultTimeout when not given;
// 0 means none beyond the context).
func WithTimeout(d time.Duration) Option {
	return func(c *Client) { c.timeout = d }
}

// WithWarn makes the client tell people, through warn, about what it does
// that is unsafe, each once per Client: sending the token over plain
// http:// to a host that is not loopback (localhost, 127.0.0.0/8, ::1),
// where anyone on the network path can read it. A CLI prints the message
// on its standard error, a daemon logs it.
func WithWarn(warn func(msg string)) Option {
	return func(c *Client) { c.warn = warn }
}

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// New returns a client of the coordinator at baseURL (such as
// "http://127.0.0.1:8080"; a path prefix is kept) that sends token as
// "Authorization: Bearer TOKEN" (none when token is empty). A baseURL that
// is not an absolute http or https URL makes every call fail with an error
// that says so.
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{token: token, timeout: DefaultTimeout, userAgent: "scimesh-client"}
	c.base, c.baseErr = parseBase(baseURL)
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = &http.Client{Transport: newTransport()}
	}
	next := c.hc.CheckRedirect
	c.hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if _, ok := c.coordinatorPath(req.URL); !ok {
			req.Header.Del("Authorization")
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return c
}

// newTransport is a keep-alive transport with bounds on every phase that
// should be quick. The bound on the answer's headers leaves room for the
// longest long-poll the API allows (60 s).
func newTransport() *http.Transport {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: 90 * time.Second,
	}
}

func parseBase(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil {
		return nil, fmt.Errorf("coordinator URL %q: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("coordinator URL %q must be an absolute http or https URL, such as http://127.0.0.1:8080", raw)
	}
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

// BaseURL returns the coordinator's URL the client was made with.
func (c *Client) BaseURL() string {
	if c.base == nil {
		return ""
	}
	return c.base.String()
}

// CloseIdleConnections closes the kept-alive connections that are idle; the
// client stays usable. Call it when done with the client.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// endpoint returns the URL of path (which starts with "/") on the
// coordinator, with query when not empty.
func (c *Client) endpoint(path string, query url.Values) (string, error) {
	if c.baseErr != nil {
		return "", c.baseErr
	}
	u := *c.base
	u.Path = c.base.Path + path
	u.RawPath = ""
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	return u.String(), nil
}

// request is one API call.
type request struct {
	method  string
	path    string // on the coordinator, escaped segments included
	query   url.Values
	body    any // marshalled as JSON unless it is an io.Reader; nil for none
	ctype   string
	header  http.Header
	timeout time.Duration // 0: c.timeout; negative: none (streaming)
}

// send performs req and returns the answer when its status is 2xx; any other
// status is read into a *Error. The caller closes the body. cancel releases
// the call's timeout and must be called once the body is read.
func (c *Client) send(parent context.Context, req *request) (resp *http.Response, cancel context.CancelFunc, err error) {
	target, err := c.endpoint(req.path, req.query)
	if err != nil {
		return nil, nil, err
	}
	timeout := req.timeout
	if timeout == 0 {
		timeout = c.timeout
	}
	ctx, cancel := parent, context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(parent, timeout)
	}
	var body io.Reader
	ctype := req.ctype
	switch b := req.body.(type) {
	case nil:
	case io.Reader:
		body = b
	default:
		data, err := json.Marshal(b)
		if err != nil {
			cancel()
			return nil, nil, fmt.Errorf("%s %s: encode request: %w", req.method, req.path, err)
		}
		body = bytes.NewReader(data)
		ctype = "application/json"
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, target, body)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("%s %s: %w", req.method, req.path, err)
	}
	if f, ok := body.(*os.File); ok {
		// A regular file's length is known: send it as such rather than
		// chunked, which lets the transport hand the file to the kernel
		// (sendfile) and the server read it in large pieces.
		if n, ok := remaining(f); ok {
			hr.ContentLength = n
			if n == 0 {
				hr.Body = http.NoBody
			}
		}
	}
	for k, v := range req.header {
		hr.Header[k] = v
	}
	if ctype != "" {
		hr.Header.Set("Content-Type", ctype)
	}
	_, onBase := c.coordinatorPath(hr.URL)
	c.authorize(hr, onBase)
	resp, err = c.hc.Do(hr)
	if err != nil {
		cancel()
		return nil, nil, transportError(parent, req.method+" "+target, unwrapURLError(err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer cancel()
		defer resp.Body.Close()
		return nil, nil, readError(resp, req.method+" "+req.path)
	}
	return resp, cancel, nil
}

// authorize sets the headers every request carries, and the token when
// withToken: the caller found the request goes to the coordinator.
func (c *Client) authorize(r *http.Request, withToken bool) {
	if c.userAgent != "" {
		r.Header.Set("User-Agent", c.userAgent)
	}
	if c.token != "" && withToken {
		if c.warn != nil && r.URL.Scheme == "http" && !topology.Loopback(r.URL.Hostname()) {
			c.plainWarn.Do(func() {
				c.warn("sending the token over plain http to " + r.URL.Host + "; anyone on the network path can read it and act with it — use https")
			})
		}
		r.Header.Set("Authorization", "Bearer "+c.token)
	}
}

// maxJSONAnswer bounds a JSON answer read whole; results of big batches
// stay far below it.
const maxJSONAnswer = 64 << 20

// call performs req and decodes a JSON answer into out (when not nil). It
// returns the answer's status and its headers.
func (c *Client) call(ctx context.Context, req *request, out any) (int, http.Header, error) {
	resp, cancel, err := c.send(ctx, req)
	if err != nil {
		return 0, nil, err
	}
	defer cancel()
	defer resp.Body.Close()
	if out == nil || resp.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxJSONAnswer))
		return resp.StatusCode, resp.Header, nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONAnswer))
	if err != nil {
		return 0, nil, transportError(ctx, req.method+" "+req.path+": read answer", err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return 0, nil, fmt.Errorf("%s %s: the answer is not the expected JSON (%w): %s", req.method, req.path, err, snippet(data))
	}
	return resp.StatusCode, resp.Header, nil
}

// stream performs req and returns the answer's body for the caller to read
// and close; the request lives until the body is closed or ctx is done.
func (c *Client) stream(ctx context.Context, req *request) (io.ReadCloser, error) {
	req.timeout = -1
	resp, cancel, err := c.send(ctx, req)
	if err != nil {
		return nil, err
	}
	return &body{ReadCloser: resp.Body, cancel: cancel}, nil
}

// body releases its request's context once closed.
type body struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *body) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// snippet shortens an unexpected answer body for an error message.
func snippet(data []byte) string {
	const limit = 200
	s := strings.TrimSpace(string(data))
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// unwrapURLError drops the *url.Error around a transport failure: its
// message repeats the method and URL, which the caller's message already
// names.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// pathEscape escapes an ID for one path segment; IDs hold ':' which may stay.
func pathEscape(id string) string { return url.PathEscape(id) }

// remaining is how many bytes of the regular file f are left to read.
func remaining(f *os.File) (int64, bool) {
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return 0, false
	}
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, false
	}
	return st.Size() - off, true
}
