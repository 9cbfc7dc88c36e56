package httpremote

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
)

// The client's side of coded blobs (remote.Coder, remote.CoderInto).

// Codings implements remote.Coder: what the server's capabilities list.
func (c *Client) Codings() []string { return c.caps.Codings }

// GetCoded implements remote.Coder: one request for the whole batch. A
// server that lists no codings is asked for raw blobs.
func (c *Client) GetCoded(ctx context.Context, ds []objects.Digest, accept []string) ([]remote.CodedBlob, error) {
	if len(ds) == 1 && len(c.caps.Codings) > 0 && len(accept) > 0 {
		b, err := c.getCodedOne(ctx, ds[0], accept, nil)
		if err != nil {
			return nil, err
		}
		return []remote.CodedBlob{b}, nil
	}
	if len(c.caps.Codings) == 0 || len(accept) == 0 {
		data, err := c.GetBlobs(ctx, ds)
		out := make([]remote.CodedBlob, len(data))
		for i, b := range data {
			out[i] = remote.CodedBlob{Digest: ds[i], Size: int64(len(b)), Coding: remote.CodingRaw, Data: b}
		}
		return out, err
	}
	var out []remote.CodedBlob
	err := c.do(ctx, "POST", "/v1/blobs/get", nil, "", digestList{Digests: ds, Accept: accept}, nil, func(r *http.Response) error {
		out = out[:0]
		if r.Header.Get("Content-Type") != codedBlobsType {
			return fmt.Errorf("%w: a coded read answered as %q", errNoRetry, r.Header.Get("Content-Type"))
		}
		rd := io.LimitReader(r.Body, remote.MaxBatchBytes+int64(codedHead*len(ds))+1)
		var total int64
		for _, d := range ds {
			b, err := readCoded(rd, false, &total)
			if errs.ClassOf(err) != 0 {
				return fmt.Errorf("%w: %v", errNoRetry, err)
			}
			if err != nil {
				return err // cut short: asked again
			}
			b.Digest = d
			out = append(out, b)
		}
		return nil
	})
	return out, err
}

// GetCodedInto implements remote.CoderInto.
func (c *Client) GetCodedInto(ctx context.Context, d objects.Digest, accept []string, buf []byte) (remote.CodedBlob, error) {
	if len(c.caps.Codings) == 0 || len(accept) == 0 {
		out, err := c.GetCoded(ctx, []objects.Digest{d}, accept)
		if err != nil {
			return remote.CodedBlob{}, err
		}
		return out[0], nil
	}
	return c.getCodedOne(ctx, d, accept, buf)
}

// getCodedOne reads one blob with GET /v1/blobs/HEX, asking for it coded:
// a raw blob comes as it always does (the server's sendfile), a coded one
// as stored, its coding in the answer's headers. Its bytes go into buf
// when they fit.
func (c *Client) getCodedOne(ctx context.Context, d objects.Digest, accept []string, buf []byte) (remote.CodedBlob, error) {
	b := remote.CodedBlob{Digest: d, Coding: remote.CodingRaw}
	hdr := http.Header{headerAcceptCodings: {strings.Join(accept, ", ")}}
	err := c.doWith(ctx, "GET", "/v1/blobs/"+d.String(), nil, hdr, "", nil, nil, func(r *http.Response) error {
		var err error
		if b, err = codedFromHeaders(d, r.Header, r.ContentLength); err != nil {
			return fmt.Errorf("%w: %v", errNoRetry, err)
		}
		b.Data, err = readBlobBody(r, buf)
		return err
	})
	if err == nil && b.Coding == remote.CodingRaw {
		b.Size = int64(len(b.Data))
	}
	return b, err
}

// PutCoded implements remote.Coder: one request for the whole batch.
func (c *Client) PutCoded(ctx context.Context, blobs []remote.CodedBlob) ([]objects.Digest, error) {
	if len(c.caps.Codings) == 0 {
		return nil, errs.New(errs.UnsupportedVersion, "remote", "%s takes raw blobs only", c.where())
	}
	var n int
	for _, b := range blobs {
		n += 32 + codedHead + len(b.Data)
	}
	body := make([]byte, 0, n)
	for _, b := range blobs {
		body = appendCoded(body, b, true)
	}
	var out rawList
	err := c.do(ctx, "POST", "/v1/blobs/coded", nil, "application/octet-stream", body, &out, nil)
	return out.Raw, err
}
