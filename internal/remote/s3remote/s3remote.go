package s3remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"golang.org/x/sync/errgroup"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/remote"
)

// Options say how to reach the object store; empty fields come from
// AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION.
type Options struct {
	Endpoint  string // http(s)://HOST[:PORT]; default https://s3.amazonaws.com
	AccessKey string
	SecretKey string
	Region    string
}

// maxRefDoc bounds a ref's document (its history).
const maxRefDoc = 64 << 20

// parallel is how many requests one call has in flight.
const parallel = 16

// Remote is a bucket prefix used as a remote.
type Remote struct {
	c      *minio.Client
	bucket string
	prefix string
	url    string

	probeOnce sync.Once
	probeErr  error

	packs packCache // see packs.go
}

var (
	_ remote.Remote     = (*Remote)(nil)
	_ remote.PushLocker = (*Remote)(nil)
)

// Open parses s3://BUCKET[/PREFIX] and connects.
func Open(u string, o Options) (*Remote, error) {
	pu, err := url.Parse(u)
	if err != nil || pu.Scheme != "s3" || pu.Host == "" {
		return nil, errs.New(errs.SchemaError, "s3", "%q: want s3://BUCKET[/PREFIX]", u)
	}
	prefix := strings.Trim(pu.Path, "/")
	if prefix != "" {
		prefix += "/"
	}
	env := func(v *string, name, def string) {
		if *v == "" {
			*v = os.Getenv(name)
		}
		if *v == "" {
			*v = def
		}
	}
	env(&o.Endpoint, "AWS_ENDPOINT_URL", "https://s3.amazonaws.com")
	env(&o.AccessKey, "AWS_ACCESS_KEY_ID", "")
	env(&o.SecretKey, "AWS_SECRET_ACCESS_KEY", "")
	env(&o.Region, "AWS_REGION", "us-east-1")
	ep, err := url.Parse(o.Endpoint)
	if err != nil || (ep.Scheme != "http" && ep.Scheme != "https") || ep.Host == "" {
		return nil, errs.New(errs.SchemaError, "s3", "endpoint %q: want http(s)://HOST[:PORT]", o.Endpoint)
	}
	c, err := minio.New(ep.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(o.AccessKey, o.SecretKey, ""),
		Secure:       ep.Scheme == "https",
		Region:       o.Region,
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	return &Remote{c: c, bucket: pu.Host, prefix: prefix, url: u}, nil
}

func (r *Remote) blobKey(d objects.Digest) string {
	h := d.String()
	return r.prefix + "blobs/" + h[:2] + "/" + h
}
func (r *Remote) manifestKey(d objects.Digest) string { return r.prefix + "manifests/" + d.String() }
func (r *Remote) refKey(name string) string           { return r.prefix + "refs/" + name + ":ref" }
func (r *Remote) tagKey(name, tag string) string      { return r.prefix + "tags/" + name + ":" + tag }

// get reads a whole object (or the range opts asks) of at most limit bytes
// and its ETag, in one request (minio.Client's Object would send a HEAD
// first to size the buffer; Core's GET answers with the size).
func (r *Remote) get(ctx context.Context, key string, limit int64, opts minio.GetObjectOptions) ([]byte, string, error) {
	body, info, _, err := minio.Core{Client: r.c}.GetObject(ctx, r.bucket, key, opts)
	if err != nil {
		return nil, "", err
	}
	defer body.Close()
	var buf bytes.Buffer
	buf.Grow(int(min(max(info.Size, 0), limit)) + bytes.MinRead)
	if _, err := buf.ReadFrom(io.LimitReader(body, limit+1)); err != nil {
		return nil, "", err
	}
	if int64(buf.Len()) > limit {
		return nil, "", errs.New(errs.SizeLimitExceeded, "s3", "object %s is over %d bytes", key, limit)
	}
	if info.Size >= 0 && int64(buf.Len()) != info.Size {
		return nil, "", fmt.Errorf("s3: object %s: %d bytes of %d: cut short", key, buf.Len(), info.Size)
	}
	return buf.Bytes(), info.ETag, nil
}

// put writes an object; with ifAbsent it is refused (412) if one exists,
// with etag only if the object still has that ETag.
func (r *Remote) put(ctx context.Context, key string, data []byte, ifAbsent bool, etag string) error {
	opts := minio.PutObjectOptions{DisableMultipart: true, ContentType: "application/octet-stream"}
	switch {
	case ifAbsent:
		opts.SetMatchETagExcept("*")
	case etag != "":
		opts.SetMatchETag(etag)
	}
	_, err := r.c.PutObject(ctx, r.bucket, key, bytes.NewReader(data), int64(len(data)), opts)
	return err
}

func (r *Remote) exists(ctx context.Context, key string) (bool, error) {
	_, err := r.c.StatObject(ctx, r.bucket, key, minio.StatObjectOptions{})
	if isNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// listFrom is how many questions about one fan-out folder make it cheaper
// to list the folder (a request per 1000 keys) than to ask for each blob.
const listFrom = 16

// HasBlobs implements remote.Remote, several questions at once: first the
// pack indexes, then one HEAD per blob, or one listing of a fan-out folder
// that many questions share.
func (r *Remote) HasBlobs(ctx context.Context, ds []objects.Digest) ([]bool, error) {
	if len(ds) > remote.MaxHasBlobs {
		return nil, errs.New(errs.SizeLimitExceeded, "s3", "asked about %d blobs at once (at most %d)", len(ds), remote.MaxHasBlobs)
	}
	_, out, err := r.locate(ctx, ds, true)
	if err != nil {
		return nil, err
	}
	byFolder := map[string][]int{}
	for i, d := range ds {
		if out[i] {
			continue
		}
		h := d.String()[:2]
		byFolder[h] = append(byFolder[h], i)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for folder, idx := range byFolder {
		if len(idx) >= listFrom {
			g.Go(func() error {
				have := map[string]bool{}
				err := r.list(gctx, "blobs/"+folder+"/", func(o minio.ObjectInfo) error {
					have[o.Key] = true
					return nil
				})
				for _, i := range idx {
					out[i] = have[r.blobKey(ds[i])]
				}
				return err
			})
			continue
		}
		for _, i := range idx {
			g.Go(func() error {
				ok, err := r.exists(gctx, r.blobKey(ds[i]))
				out[i] = ok
				return err
			})
		}
	}
	return out, r.wrap(g.Wait(), "stat blobs in")
}

// GetBlob implements remote.Remote with a ranged GET, of the blob's own
// object or, for a packed blob, of its pack.
func (r *Remote) GetBlob(ctx context.Context, d objects.Digest, off, n int64) ([]byte, error) {
	if off < 0 || n == 0 {
		return remote.Range(nil, d, off, n)
	}
	if l, ok := r.packs.find(d); ok {
		b, err := r.getPackedOne(ctx, d, l)
		if err == nil {
			return remote.Range(b, d, off, n)
		}
		if errs.ClassOf(err) != errs.NotFound {
			return nil, err
		}
	}
	var opts minio.GetObjectOptions
	var err error
	switch {
	case n > 0:
		err = opts.SetRange(off, off+n-1)
	case off > 0:
		err = opts.SetRange(off, 0) // minio-go: from off to the end
	}
	if err != nil {
		return nil, errs.Wrap(errs.SchemaError, "s3", err, "range %d+%d", off, n)
	}
	b, _, err := r.get(ctx, r.blobKey(d), objects.ChunkSize, opts)
	if isNotFound(err) {
		// Packed by another client since this one read the indexes?
		if locs, in, lerr := r.locate(ctx, []objects.Digest{d}, false); lerr != nil {
			return nil, lerr
		} else if in[0] {
			b, err := r.getPackedOne(ctx, d, locs[0])
			if err != nil {
				return nil, err
			}
			return remote.Range(b, d, off, n)
		}
		return nil, r.absent(ctx, remote.NoBlob(r.url, d))
	}
	if status, _ := code(err); status == http.StatusRequestedRangeNotSatisfiable {
		return nil, errs.New(errs.SchemaError, "s3", "range %d+%d outside blob %s", off, n, d.Short())
	}
	if err == nil && n > 0 && int64(len(b)) != n {
		// S3 cuts a range that runs past the end short rather than refuse it.
		return nil, errs.New(errs.SchemaError, "s3", "range %d+%d runs past the end of blob %s (%d bytes from %d)", off, n, d.Short(), len(b), off)
	}
	return b, r.wrap(err, "get blob from")
}

// GetBlobs implements remote.Remote: packed blobs are read by ranges of
// their packs, many to a GET; the others (S3 has no batch read) several at
// a time.
func (r *Remote) GetBlobs(ctx context.Context, ds []objects.Digest) ([][]byte, error) {
	if err := remote.CheckBatch(len(ds), 0); err != nil {
		return nil, err
	}
	out := make([][]byte, len(ds))
	var total atomic.Int64 // a batch stays under MaxBatchBytes, whatever it asks
	locs, in, err := r.locate(ctx, ds, false)
	if err != nil {
		return nil, err
	}
	var packed []int
	for i := range ds {
		if in[i] {
			packed = append(packed, i)
			total.Add(locs[i].size)
		}
	}
	if err := remote.CheckBatch(len(ds), total.Load()); err != nil {
		return nil, err
	}
	lost, err := r.getPacked(ctx, locs, packed, out)
	if err != nil {
		return nil, err
	}
	for _, i := range lost {
		total.Add(-locs[i].size)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for i, d := range ds {
		if out[i] != nil {
			continue
		}
		g.Go(func() error {
			var err error
			if out[i], err = r.GetBlob(gctx, d, 0, -1); err != nil {
				return err
			}
			return remote.CheckBatch(len(ds), total.Add(int64(len(out[i]))))
		})
	}
	return out, g.Wait()
}

// PutBlobs implements remote.Remote. The bytes are checked here, before
// they are sent: a bucket cannot check them itself.
func (r *Remote) PutBlobs(ctx context.Context, blobs []remote.Blob) error {
	if err := remote.VerifyBlobs(blobs); err != nil {
		return err
	}
	var small, large []remote.Blob
	for _, b := range blobs {
		if len(b.Data) < packBelow && len(b.Data) > 0 {
			small = append(small, b)
		} else {
			large = append(large, b)
		}
	}
	if len(small) == 1 {
		large, small = append(large, small...), nil // a pack of one saves nothing
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	if len(small) > 0 {
		g.Go(func() error { return r.putPack(gctx, small) })
	}
	for _, b := range large {
		g.Go(func() error {
			err := r.put(gctx, r.blobKey(b.Digest), b.Data, true, "")
			if isPrecondition(err) {
				return nil // there already: the same bytes
			}
			return err
		})
	}
	return r.wrap(g.Wait(), "put blobs to")
}

// GetManifest implements remote.Remote.
func (r *Remote) GetManifest(ctx context.Context, d objects.Digest) ([]byte, error) {
	b, _, err := r.get(ctx, r.manifestKey(d), remote.MaxManifestBytes, minio.GetObjectOptions{})
	if isNotFound(err) {
		return nil, r.absent(ctx, remote.NoManifest(r.url, d))
	}
	return b, r.wrap(err, "get manifest from")
}

// PutManifest implements remote.Remote.
func (r *Remote) PutManifest(ctx context.Context, d objects.Digest, encoded []byte) (created bool, err error) {
	m, err := remote.CheckManifest(d, encoded)
	if err != nil {
		return false, err
	}
	need := m.Blobs()
	var missing []objects.Digest
	for i := 0; i < len(need); i += remote.MaxHasBlobs {
		part := need[i:min(i+remote.MaxHasBlobs, len(need))]
		has, err := r.HasBlobs(ctx, part)
		if err != nil {
			return false, err
		}
		for j, ok := range has {
			if !ok {
				missing = append(missing, part[j])
			}
		}
	}
	if len(missing) > 0 {
		return false, &remote.MissingBlobsError{Manifest: d, Missing: missing}
	}
	err = r.put(ctx, r.manifestKey(d), encoded, true, "")
	if isPrecondition(err) {
		return false, nil // written before: If-None-Match refused it
	}
	return err == nil, r.wrap(err, "put manifest to")
}

type refEntry struct {
	Digest  objects.Digest `json:"digest"`
	Message string         `json:"message,omitempty"`
	Time    time.Time      `json:"time"`
}

type refObject struct {
	Name    string     `json:"name"`
	History []refEntry `json:"history"` // newest first
}

// readRef reads a ref's object and ETag; a missing ref is a nil doc.
func (r *Remote) readRef(ctx context.Context, name string) (*refObject, string, error) {
	if _, err := refs.ParseName(name); err != nil {
		return nil, "", err
	}
	b, etag, err := r.get(ctx, r.refKey(name), maxRefDoc, minio.GetObjectOptions{})
	// minio-go reads an object's later parts with If-Match on the ETag it
	// first saw: a ref moved by someone else in between answers 412. That
	// is a read to take again, of the newer ref.
	for try := 0; isPrecondition(err) && try < 5; try++ {
		b, etag, err = r.get(ctx, r.refKey(name), maxRefDoc, minio.GetObjectOptions{})
	}
	if isNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", r.wrap(err, "read ref from")
	}
	var doc refObject
	if err := json.Unmarshal(b, &doc); err != nil || doc.Name != name || len(doc.History) == 0 {
		return nil, "", errs.New(errs.IntegrityError, "s3", "ref object %s on %s does not parse", r.refKey(name), r.url)
	}
	return &doc, etag, nil
}

// Ref implements remote.Remote.
func (r *Remote) Ref(ctx context.Context, name string) (remote.RefInfo, error) {
	doc, _, err := r.readRef(ctx, name)
	if err != nil {
		return remote.RefInfo{}, err
	}
	if doc == nil {
		return remote.RefInfo{}, r.absent(ctx, remote.NoRef(r.url, name))
	}
	info := remote.RefInfo{Name: name, Current: doc.History[0].Digest}
	for _, e := range doc.History {
		info.History = append(info.History, e.Digest)
	}
	return info, nil
}

// MoveRef implements remote.Remote: a conditional write against the ETag
// read, so that of two racing moves exactly one wins.
func (r *Remote) MoveRef(ctx context.Context, name string, from, to objects.Digest, message string) error {
	doc, etag, err := r.readRef(ctx, name)
	if err != nil {
		return err
	}
	if ok, err := r.exists(ctx, r.manifestKey(to)); err != nil {
		return r.wrap(err, "stat manifest in")
	} else if !ok {
		return remote.NoManifest(r.url, to)
	}
	var cur objects.Digest
	if doc != nil {
		cur = doc.History[0].Digest
	}
	if cur != from {
		return remote.RefMoved(r.url, name, from, cur)
	}
	if cur == to {
		return nil
	}
	if err := r.probe(ctx); err != nil {
		return err
	}
	if doc == nil {
		doc = &refObject{Name: name}
	}
	doc.History = append([]refEntry{{Digest: to, Message: message, Time: time.Now().UTC()}}, doc.History...)
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	err = r.put(ctx, r.refKey(name), b, etag == "", etag)
	if isPrecondition(err) {
		now, _, rerr := r.readRef(ctx, name)
		var d objects.Digest
		if rerr == nil && now != nil {
			d = now.History[0].Digest
		}
		return remote.RefMoved(r.url, name, from, d)
	}
	return r.wrap(err, "move ref in")
}

type tagObject struct {
	Digest objects.Digest `json:"digest"`
}

// Tag implements remote.Remote.
func (r *Remote) Tag(ctx context.Context, name, tag string) (objects.Digest, error) {
	if _, err := refs.ParseName(name); err != nil {
		return objects.Digest{}, err
	}
	if _, err := refs.ParseTag(tag); err != nil {
		return objects.Digest{}, err
	}
	b, _, err := r.get(ctx, r.tagKey(name, tag), 4096, minio.GetObjectOptions{})
	if isNotFound(err) {
		return objects.Digest{}, r.absent(ctx, remote.NoTag(r.url, name, tag))
	}
	if err != nil {
		return objects.Digest{}, r.wrap(err, "read tag from")
	}
	var doc tagObject
	if err := json.Unmarshal(b, &doc); err != nil || doc.Digest.IsZero() {
		return objects.Digest{}, errs.New(errs.IntegrityError, "s3", "tag object %s on %s does not parse", r.tagKey(name, tag), r.url)
	}
	return doc.Digest, nil
}

// CreateTag implements remote.Remote: written only if absent.
func (r *Remote) CreateTag(ctx context.Context, name, tag string, d objects.Digest) (bool, error) {
	if _, err := refs.ParseName(name); err != nil {
		return false, err
	}
	if _, err := refs.ParseTag(tag); err != nil {
		return false, err
	}
	if ok, err := r.exists(ctx, r.manifestKey(d)); err != nil {
		return false, r.wrap(err, "stat manifest in")
	} else if !ok {
		return false, remote.NoManifest(r.url, d)
	}
	if err := r.probe(ctx); err != nil {
		return false, err
	}
	b, _ := json.Marshal(tagObject{Digest: d})
	err := r.put(ctx, r.tagKey(name, tag), b, true, "")
	if isPrecondition(err) {
		old, err := r.Tag(ctx, name, tag)
		if err != nil {
			return false, err
		}
		if old != d {
			return false, errs.New(errs.Conflict, "s3", "tag %s:%s on %s already points at %s (tags are immutable; choose another tag)", name, tag, r.url, old.Short())
		}
		return false, nil
	}
	return err == nil, r.wrap(err, "create tag in")
}

// probe checks, once, that the server honours If-None-Match and If-Match:
// a server that ignores them would let two pushes overwrite each other.
func (r *Remote) probe(ctx context.Context) error {
	r.probeOnce.Do(func() { r.probeErr = r.runProbe(ctx) })
	return r.probeErr
}

func (r *Remote) runProbe(ctx context.Context) error {
	var rnd [8]byte
	rand.Read(rnd[:])
	key := r.prefix + "probe/" + hex.EncodeToString(rnd[:])
	defer r.c.RemoveObject(context.WithoutCancel(ctx), r.bucket, key, minio.RemoveObjectOptions{})
	if err := r.put(ctx, key, []byte("1"), true, ""); err != nil {
		return r.wrap(err, "probe conditional writes on")
	}
	ignored := func(err error) error {
		if isPrecondition(err) {
			return nil
		}
		if err != nil {
			return r.wrap(err, "probe conditional writes on")
		}
		return errs.New(errs.UnsupportedVersion, "s3", "%s: the object store ignores conditional writes (If-None-Match / If-Match), so two pushes could overwrite each other's refs; refusing to move refs or create tags there (use a server that supports them, or serve the bucket through one `mstore serve`)", r.url)
	}
	if err := ignored(r.put(ctx, key, []byte("2"), true, "")); err != nil {
		return err
	}
	return ignored(r.put(ctx, key, []byte("3"), false, "00000000000000000000000000000000"))
}

// Close implements remote.Remote.
func (r *Remote) Close() error { return nil }
