package httpremote

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
)

// ClientOptions say how to reach a server.
type ClientOptions struct {
	// Token is sent as a bearer token, and never to another host after a
	// redirect.
	Token string
	// StallTimeout is how long a request may go without a byte of its
	// answer arriving (a slow answer that keeps moving is never cut off),
	// and how long the client goes on retrying without any request
	// succeeding before it gives up; zero means a minute.
	StallTimeout time.Duration
	// MaxRetryAfter caps the wait a server's Retry-After asks for; zero
	// means 30 s.
	MaxRetryAfter time.Duration
	// Transport, for tests; nil means a clone of http.DefaultTransport
	// (which honours the proxy variables).
	Transport http.RoundTripper
}

// Retry-After is honoured up to this; backoff doubles up to maxBackoff.
const (
	maxRetryAfter = 30 * time.Second
	firstBackoff  = 100 * time.Millisecond
	maxBackoff    = 5 * time.Second
)

// Client is a remote.Remote over HTTP.
type Client struct {
	base  *url.URL
	hc    *http.Client
	token string
	stall time.Duration
	// maxWait caps Retry-After (ClientOptions.MaxRetryAfter).
	maxWait time.Duration
	caps    Capabilities
	// pushLock is the id of the push lock the server holds for this
	// client (locks.go), sent with every request.
	pushLock atomic.Pointer[string]
}

var (
	_ remote.Remote     = (*Client)(nil)
	_ remote.Coder      = (*Client)(nil)
	_ remote.CoderInto  = (*Client)(nil)
	_ remote.PushLocker = (*Client)(nil)
)

// New connects to the server at base and reads its capabilities.
func New(ctx context.Context, base string, o ClientOptions) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errs.New(errs.SchemaError, "remote", "%q: want http(s)://HOST[:PORT][/PATH]", base)
	}
	tr := o.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 32
		tr = t
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = time.Minute
	}
	if o.MaxRetryAfter <= 0 {
		o.MaxRetryAfter = maxRetryAfter
	}
	c := &Client{base: u, token: o.Token, stall: o.StallTimeout, maxWait: o.MaxRetryAfter}
	c.hc = &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("too many redirects")
		}
		// The token is for the host it was given for: Go's client keeps it
		// for another port of the same host, and for subdomains.
		if req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
			req.Header.Del("Authorization")
		}
		return nil
	}}
	if err := c.do(ctx, "GET", "/v1/capabilities", nil, "", nil, &c.caps, nil); err != nil {
		return nil, err
	}
	if c.caps.API != "mstore" || !contains(c.caps.Versions, APIVersion) {
		return nil, errs.New(errs.UnsupportedVersion, "remote", "%s speaks %q versions %v; this build speaks mstore version %d", base, c.caps.API, c.caps.Versions, APIVersion)
	}
	return c, nil
}

func contains(vs []int, v int) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

func (c *Client) where() string { return c.base.String() }

// httpError is a response that is not a success.
type httpError struct {
	status     int
	retryAfter time.Duration
	doc        errorDoc
}

func (e *httpError) Error() string { return e.doc.Error.Message }

func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusBadGateway ||
		status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout || status == http.StatusInternalServerError
}

// do sends a request, retrying with backoff and jitter what may succeed
// later (network errors, 5xx, 429), honouring Retry-After up to a cap, and
// giving up once nothing has succeeded for the stall timeout. The response
// is decoded into out (JSON) or handed to read; in is the body: bytes as
// they are, anything else as JSON.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, ctype string, in, out any, read func(*http.Response) error) error {
	return c.doWith(ctx, method, path, query, nil, ctype, in, out, read)
}

// doWith is do with extra request headers.
func (c *Client) doWith(ctx context.Context, method, path string, query url.Values, hdr http.Header, ctype string, in, out any, read func(*http.Response) error) error {
	var payload []byte
	switch b := in.(type) {
	case nil:
	case []byte:
		payload = b
	default:
		var err error
		if payload, err = json.Marshal(b); err != nil {
			return err
		}
		ctype = "application/json"
	}
	u := *c.base
	u.Path += path
	u.RawQuery = query.Encode()
	start := time.Now()
	backoff := firstBackoff
	for attempt := 1; ; attempt++ {
		err := c.once(ctx, method, u.String(), hdr, ctype, payload, out, read)
		var he *httpError
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := time.Duration(0)
		switch {
		case errors.As(err, &he) && !retryable(he.status):
			return c.classify(he)
		case errors.As(err, &he):
			wait = he.retryAfter
		case errors.Is(err, errNoRetry):
			return err
		}
		if wait == 0 {
			wait = backoff/2 + rand.N(backoff/2+1) // jitter
			backoff = min(2*backoff, maxBackoff)
		}
		if time.Since(start)+wait > c.stall {
			if he != nil {
				err = c.classify(he)
			}
			return fmt.Errorf("remote: %s %s: no answer for %s after %d attempts (is the server up? retry later): %w", method, c.where(), c.stall.Round(time.Second), attempt, err)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

var errNoRetry = errors.New("remote: bad response")

func (c *Client) once(ctx context.Context, method, u string, hdr http.Header, ctype string, payload []byte, out any, read func(*http.Response) error) error {
	ctx, watch, stop := withStall(ctx, c.stall)
	defer stop()
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	if payload != nil {
		// An upload that moves is progress too; the length and GetBody
		// (for a redirect) stay those of the payload.
		req.Body = io.NopCloser(watch.sending(bytes.NewReader(payload)))
		req.GetBody = func() (io.ReadCloser, error) {
			return io.NopCloser(watch.sending(bytes.NewReader(payload))), nil
		}
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if id := c.pushLock.Load(); id != nil {
		req.Header.Set(lockHeader, *id)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return stallCause(ctx, err)
	}
	defer resp.Body.Close()
	watch.moved()
	watch.body(resp)
	if resp.StatusCode >= 300 {
		return c.failure(resp, method+" "+u+": ")
	}
	if read != nil {
		return stallCause(ctx, read(resp))
	}
	if out != nil {
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxJSONBody)).Decode(out); err != nil {
			if ctx.Err() != nil {
				return stallCause(ctx, err)
			}
			return fmt.Errorf("%w: %s %s: %v", errNoRetry, method, u, err)
		}
	}
	return nil
}

// failure reads a response that is not a success: its error document and
// the wait its Retry-After asks for (seconds or an HTTP date), capped.
func (c *Client) failure(resp *http.Response, what string) *httpError {
	he := &httpError{status: resp.StatusCode}
	if v := resp.Header.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(v); err == nil && s >= 0 {
			he.retryAfter = time.Duration(s) * time.Second
		} else if at, err := http.ParseTime(v); err == nil {
			he.retryAfter = max(time.Until(at), 0)
		}
		he.retryAfter = min(he.retryAfter, c.maxWait)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(b, &he.doc) != nil || he.doc.Error.Message == "" {
		he.doc.Error.Message = fmt.Sprintf("%sHTTP %d: %s", what, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return he
}

// classify turns a server's error back into the error class it named.
func (c *Client) classify(he *httpError) error {
	if len(he.doc.Missing) > 0 {
		return &remote.MissingBlobsError{Missing: he.doc.Missing}
	}
	msg := he.doc.Error.Message
	switch {
	case he.status == http.StatusUnauthorized:
		return errs.New(errs.Unauthorized, "remote", "%s refused the request (HTTP 401): %s", c.where(), msg)
	case he.status == http.StatusForbidden:
		return errs.New(errs.Unauthorized, "remote", "%s refused the request (HTTP 403): %s", c.where(), msg)
	}
	if cl := classByKey(he.doc.Error.Class); cl != 0 {
		return errs.New(cl, "remote", "%s: %s", c.where(), msg)
	}
	return fmt.Errorf("remote: %s: %s", c.where(), msg)
}

// HasBlobs implements remote.Remote.
func (c *Client) HasBlobs(ctx context.Context, ds []objects.Digest) ([]bool, error) {
	var out haveList
	err := c.do(ctx, "POST", "/v1/blobs/has", nil, "", digestList{Digests: ds}, nil, func(r *http.Response) error {
		return json.NewDecoder(io.LimitReader(r.Body, maxJSONBody)).Decode(&out)
	})
	if err == nil && len(out.Have) != len(ds) {
		err = fmt.Errorf("remote: %s answered %d of %d blob questions", c.where(), len(out.Have), len(ds))
	}
	return out.Have, err
}

// GetBlob implements remote.Remote with a Range request.
func (c *Client) GetBlob(ctx context.Context, d objects.Digest, off, n int64) ([]byte, error) {
	if off < 0 || n == 0 {
		return remote.Range(nil, d, off, n)
	}
	var out []byte
	err := c.doRange(ctx, d, off, n, &out)
	if err == nil && n > 0 && int64(len(out)) != n {
		// A server cuts a range that runs past the end short (RFC 9110).
		return nil, errs.New(errs.SchemaError, "remote", "range %d+%d runs past the end of blob %s (%d bytes from %d)", off, n, d.Short(), len(out), off)
	}
	return out, err
}

func (c *Client) doRange(ctx context.Context, d objects.Digest, off, n int64, out *[]byte) error {
	u := *c.base
	u.Path += "/v1/blobs/" + d.String()
	start := time.Now()
	backoff := firstBackoff
	for {
		req, err := http.NewRequestWithContext(ctx, "GET", u.String(), nil)
		if err != nil {
			return err
		}
		if off > 0 || n >= 0 {
			if n < 0 {
				req.Header.Set("Range", fmt.Sprintf("bytes=%d-", off))
			} else {
				req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
			}
		}
		err = c.getBody(req, off, n, out)
		var he *httpError
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &he) && !retryable(he.status):
			if he.status == http.StatusRequestedRangeNotSatisfiable {
				return errs.New(errs.SchemaError, "remote", "range %d+%d outside blob %s", off, n, d.Short())
			}
			return c.classify(he)
		case errors.Is(err, errNoRetry):
			return err
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		if he != nil && he.retryAfter > 0 {
			wait = he.retryAfter
		}
		backoff = min(2*backoff, maxBackoff)
		if time.Since(start)+wait > c.stall {
			return fmt.Errorf("remote: GET blob %s from %s: no answer for %s (is the server up? retry later): %w", d.Short(), c.where(), c.stall.Round(time.Second), err)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *Client) getBody(req *http.Request, off, n int64, out *[]byte) error {
	ctx, watch, stop := withStall(req.Context(), c.stall)
	defer stop()
	req = req.WithContext(ctx)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return stallCause(ctx, err)
	}
	defer resp.Body.Close()
	watch.moved()
	watch.body(resp)
	if resp.StatusCode >= 300 {
		return c.failure(resp, "")
	}
	b, err := readBlobBody(resp, nil)
	if err != nil {
		return stallCause(ctx, err)
	}
	if resp.StatusCode == http.StatusOK && (off > 0 || n >= 0) {
		// A server (or proxy) that ignored the Range header.
		if b, err = remote.Range(b, objects.Digest{}, off, n); err != nil {
			return err
		}
	}
	*out = b
	return nil
}

// GetBlobs implements remote.Remote: one request for the whole batch.
func (c *Client) GetBlobs(ctx context.Context, ds []objects.Digest) ([][]byte, error) {
	var out [][]byte
	err := c.do(ctx, "POST", "/v1/blobs/get", nil, "", digestList{Digests: ds}, nil, func(r *http.Response) error {
		out = out[:0]
		rd := io.LimitReader(r.Body, remote.MaxBatchBytes+int64(8*len(ds))+1)
		var total int64
		for range ds {
			var head [8]byte
			if _, err := io.ReadFull(rd, head[:]); err != nil {
				return err
			}
			n := binary.BigEndian.Uint64(head[:])
			if n > objects.ChunkSize || total+int64(n) > remote.MaxBatchBytes {
				return fmt.Errorf("%w: batch answer over its bounds", errNoRetry)
			}
			total += int64(n)
			b := make([]byte, n)
			if _, err := io.ReadFull(rd, b); err != nil {
				return err
			}
			out = append(out, b)
		}
		return nil
	})
	return out, err
}

// PutBlobs implements remote.Remote: one request for the whole batch.
func (c *Client) PutBlobs(ctx context.Context, blobs []remote.Blob) error {
	var n int
	for _, b := range blobs {
		n += 40 + len(b.Data)
	}
	body := make([]byte, 0, n)
	for _, b := range blobs {
		body = append(body, b.Digest[:]...)
		body = binary.BigEndian.AppendUint64(body, uint64(len(b.Data)))
		body = append(body, b.Data...)
	}
	return c.do(ctx, "POST", "/v1/blobs", nil, "application/octet-stream", body, nil, nil)
}

// readBlobBody reads an answer of at most a chunk: into buf when its
// announced length fits, else into one allocation of that length (no
// regrowing), else as it comes.
func readBlobBody(r *http.Response, buf []byte) ([]byte, error) {
	if n := r.ContentLength; n >= 0 {
		if n > objects.ChunkSize {
			return nil, fmt.Errorf("%w: blob over %d bytes", errNoRetry, objects.ChunkSize)
		}
		b := buf[:0]
		if int64(cap(buf)) < n {
			b = make([]byte, 0, n)
		}
		b = b[:n]
		_, err := io.ReadFull(r.Body, b)
		return b, err
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, objects.ChunkSize+1))
	if err == nil && len(b) > objects.ChunkSize {
		err = fmt.Errorf("%w: blob over %d bytes", errNoRetry, objects.ChunkSize)
	}
	return b, err
}

// GetManifest implements remote.Remote.
func (c *Client) GetManifest(ctx context.Context, d objects.Digest) ([]byte, error) {
	var out []byte
	err := c.do(ctx, "GET", "/v1/manifests/"+d.String(), nil, "", nil, nil, func(r *http.Response) error {
		// Into one buffer of the announced length: io.ReadAll's doubling
		// held a manifest of 100,000 tensors (27 MB) about twice.
		var buf bytes.Buffer
		buf.Grow(int(min(max(r.ContentLength, 0), remote.MaxManifestBytes)) + bytes.MinRead)
		_, err := buf.ReadFrom(io.LimitReader(r.Body, remote.MaxManifestBytes+1))
		out = buf.Bytes()
		return err
	})
	return out, err
}

// PutManifest implements remote.Remote.
func (c *Client) PutManifest(ctx context.Context, d objects.Digest, encoded []byte) (created bool, err error) {
	err = c.do(ctx, "PUT", "/v1/manifests/"+d.String(), nil, "application/json", encoded, nil, func(r *http.Response) error {
		created = r.StatusCode == http.StatusCreated
		return nil
	})
	var missing *remote.MissingBlobsError
	if errors.As(err, &missing) {
		missing.Manifest = d
	}
	return created && err == nil, err
}

// Ref implements remote.Remote.
func (c *Client) Ref(ctx context.Context, name string) (remote.RefInfo, error) {
	var doc refDoc
	err := c.do(ctx, "GET", "/v1/refs", url.Values{"name": {name}}, "", nil, &doc, nil)
	if err == nil && (len(doc.History) == 0 || doc.History[0] != doc.Current) {
		err = fmt.Errorf("remote: %s sent a ref without its history", c.where())
	}
	return remote.RefInfo{Name: name, Current: doc.Current, History: doc.History}, err
}

// Tag implements remote.Remote.
func (c *Client) Tag(ctx context.Context, name, tag string) (objects.Digest, error) {
	var doc tagDoc
	err := c.do(ctx, "GET", "/v1/tags", url.Values{"name": {name}, "tag": {tag}}, "", nil, &doc, nil)
	return doc.Digest, err
}

// MoveRef implements remote.Remote. A move retried after a lost answer may
// find the ref already where it was sent: that is its own success.
func (c *Client) MoveRef(ctx context.Context, name string, from, to objects.Digest, message string) error {
	req := moveDoc{To: to, Message: message}
	if !from.IsZero() {
		req.From = &from
	}
	err := c.do(ctx, "POST", "/v1/refs", url.Values{"name": {name}}, "", req, nil, nil)
	if errs.ClassOf(err) == errs.Conflict {
		if info, rerr := c.Ref(ctx, name); rerr == nil && info.Current == to &&
			(from.IsZero() && len(info.History) == 1 || len(info.History) > 1 && info.History[1] == from) {
			return nil
		}
	}
	return err
}

// CreateTag implements remote.Remote.
func (c *Client) CreateTag(ctx context.Context, name, tag string, d objects.Digest) (bool, error) {
	var doc tagDoc
	err := c.do(ctx, "PUT", "/v1/tags", url.Values{"name": {name}, "tag": {tag}}, "", tagDoc{Digest: d}, nil, func(r *http.Response) error {
		return json.NewDecoder(io.LimitReader(r.Body, maxJSONBody)).Decode(&doc)
	})
	return doc.Created, err
}

// Close implements remote.Remote.
func (c *Client) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}
