package ociremote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	orasremote "oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"
	"oras.land/oras-go/v2/registry/remote/retry"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/layouts/oci/modelpack"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
)

// Options say how to reach a registry.
type Options struct {
	// Username and Password, when Username is set, are basic credentials
	// (used as they are, or to get a token when the registry asks for one).
	// Otherwise the credentials for the host come from DockerConfig, else
	// $DOCKER_CONFIG/config.json, else ~/.docker/config.json (its auths;
	// credential helpers it names are run as docker runs them).
	Username, Password string
	DockerConfig       string
	// PlainHTTP speaks http:// rather than https:// (always on for a
	// loopback host, as docker does).
	PlainHTTP bool
	// Timeout is how long the registry may take to answer a request (the
	// transfer of a body is not bounded by it); zero means a minute.
	Timeout time.Duration
}

// Remote is an OCI registry repository seen as a read-only remote.Remote:
// its ref and tags name ModelPack artifacts that carry mstore's map layer.
// Push goes through Push, not through this interface.
type Remote struct {
	ref    Ref
	repo   *orasremote.Repository
	scheme string

	mu      sync.Mutex
	sources map[string]*modelpack.Source // by registry reference
}

var _ remote.Remote = (*Remote)(nil)

// Open returns the remote for an oci:// URL.
func Open(u string, o Options) (*Remote, error) {
	ref, err := Parse(u)
	if err != nil {
		return nil, err
	}
	repo, err := orasremote.NewRepository(ref.Host + "/" + ref.Repo)
	if err != nil {
		return nil, errs.Wrap(errs.SchemaError, pkg, err, "%s", u)
	}
	repo.PlainHTTP = o.PlainHTTP || loopback(ref.Host)
	repo.MaxMetadataBytes = modelpack.MaxDocumentBytes
	cred, err := credential(ref.Host, o)
	if err != nil {
		return nil, err
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = timeout
	// oras's retry transport retries 429s, 5xxs and dropped connections
	// with backoff, a request with a body only when it can be replayed.
	repo.Client = &auth.Client{Client: &http.Client{Transport: retry.NewTransport(tr)}, Cache: auth.NewCache(), Credential: cred,
		Header: http.Header{"User-Agent": {"mstore"}}}
	scheme := "https"
	if repo.PlainHTTP {
		scheme = "http"
	}
	return &Remote{ref: ref, repo: repo, scheme: scheme, sources: map[string]*modelpack.Source{}}, nil
}

func loopback(hostport string) bool {
	h := hostport
	if x, _, err := net.SplitHostPort(hostport); err == nil {
		h = x
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}

func credential(host string, o Options) (auth.CredentialFunc, error) {
	if o.Username != "" {
		return auth.StaticCredential(host, auth.Credential{Username: o.Username, Password: o.Password}), nil
	}
	var st credentials.Store
	var err error
	if o.DockerConfig != "" {
		st, err = credentials.NewStore(o.DockerConfig, credentials.StoreOptions{})
	} else {
		st, err = credentials.NewStoreFromDocker(credentials.StoreOptions{})
	}
	if err != nil {
		return nil, errs.Wrap(errs.SchemaError, pkg, err, "read the docker config's credentials")
	}
	return credentials.Credential(st), nil
}

// classify gives a registry's refusal its class.
func classify(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	var er *errcode.ErrorResponse
	what := fmt.Sprintf(format, args...)
	switch {
	case errors.As(err, &er) && (er.StatusCode == http.StatusUnauthorized || er.StatusCode == http.StatusForbidden),
		errors.Is(err, auth.ErrBasicCredentialNotFound):
		return errs.Wrap(errs.Unauthorized, pkg, err, "%s: the registry refused the credentials (log in with `docker login`, or give --username and --password-file)", what)
	case errors.As(err, &er) && er.StatusCode == http.StatusNotFound, errors.Is(err, errdef.ErrNotFound):
		return errs.Wrap(errs.NotFound, pkg, err, "%s", what)
	case errs.ClassOf(err) != 0:
		return err
	}
	return fmt.Errorf("%s: %s: %w", pkg, what, err)
}

// where names the remote in messages.
func (r *Remote) where() string { return Scheme + r.ref.Host + "/" + r.ref.Repo }

// readAll reads at most limit bytes of rc and closes it.
func readAll(rc io.ReadCloser, limit int64, what string) ([]byte, error) {
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = errs.New(errs.SizeLimitExceeded, pkg, "%s is over %d bytes", what, limit)
	}
	return b, err
}

// fetchArtifact reads and checks the manifest reference names.
func (r *Remote) fetchArtifact(ctx context.Context, reference string) (*modelpack.Artifact, ocispec.Descriptor, error) {
	a, desc, _, err := r.fetchManifest(ctx, reference)
	return a, desc, err
}

// fetchManifest is fetchArtifact, also returning the manifest's bytes.
func (r *Remote) fetchManifest(ctx context.Context, reference string) (*modelpack.Artifact, ocispec.Descriptor, []byte, error) {
	desc, rc, err := r.repo.FetchReference(ctx, reference)
	if err != nil {
		return nil, desc, nil, classify(err, "%s:%s", r.where(), reference)
	}
	b, err := readAll(rc, modelpack.MaxDocumentBytes, "the OCI manifest")
	if err != nil {
		return nil, desc, nil, classify(err, "read the manifest %s", reference)
	}
	got := digest.FromBytes(b)
	if got != desc.Digest || (r.ref.Digest != "" && reference == r.ref.Digest.String() && got != r.ref.Digest) {
		return nil, desc, nil, errs.New(errs.IntegrityError, pkg, "%s:%s: the manifest hashes to %s, the registry said %s", r.where(), reference, got, desc.Digest)
	}
	desc.Size, desc.MediaType = int64(len(b)), ocispec.MediaTypeImageManifest
	a, err := modelpack.Parse(b)
	return a, desc, b, err
}

// fetchBlob reads a whole small blob and checks it against desc.
func (r *Remote) fetchBlob(ctx context.Context, desc ocispec.Descriptor, limit int64) ([]byte, error) {
	if err := modelpack.CheckDescriptor(desc, limit, "blob "+desc.Digest.String()); err != nil {
		return nil, err
	}
	rc, err := r.repo.Blobs().Fetch(ctx, desc)
	if err != nil {
		return nil, classify(err, "fetch blob %s", desc.Digest)
	}
	b, err := readAll(rc, desc.Size, "blob "+desc.Digest.String())
	if err != nil {
		return nil, classify(err, "fetch blob %s", desc.Digest)
	}
	if int64(len(b)) != desc.Size || digest.FromBytes(b) != desc.Digest {
		return nil, errs.New(errs.IntegrityError, pkg, "blob %s from %s: %d bytes that do not hash to their digest", desc.Digest, r.where(), len(b))
	}
	return b, nil
}

// errForeign is the artifact of another tool: no map, taken in by Pull
// file by file (foreign.go).
var errForeign = errs.New(errs.SchemaError, pkg, "a ModelPack artifact without mstore's map layer (another tool pushed it): pull it as a whole with `mstore pull`")

// source resolves a registry reference to the mstore version it holds.
func (r *Remote) source(ctx context.Context, reference string) (*modelpack.Source, error) {
	r.mu.Lock()
	s := r.sources[reference]
	r.mu.Unlock()
	if s != nil {
		return s, nil
	}
	a, _, err := r.fetchArtifact(ctx, reference)
	if err != nil {
		return nil, err
	}
	if a.Map == nil {
		return nil, errForeign
	}
	mb, err := r.fetchBlob(ctx, *a.Map, modelpack.MaxMapBytes)
	if err != nil {
		return nil, err
	}
	mp, m, err := modelpack.DecodeMap(mb, a)
	if err != nil {
		return nil, err
	}
	tag := ""
	if !strings.HasPrefix(reference, "sha256:") {
		tag = reference
	}
	s = modelpack.NewSource(r.where(), r.ref.Repo, tag, mp, m, r.readRange)
	r.mu.Lock()
	r.sources[reference] = s
	r.mu.Unlock()
	return s, nil
}

// readRange reads n bytes at off of a blob with an HTTP range request; a
// registry that sends the whole blob instead is read past off.
func (r *Remote) readRange(ctx context.Context, layer digest.Digest, off, n int64) ([]byte, error) {
	ctx = auth.AppendRepositoryScope(ctx, r.repo.Reference, auth.ActionPull)
	u := fmt.Sprintf("%s://%s/v2/%s/blobs/%s", r.scheme, r.ref.Host, r.ref.Repo, layer)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	resp, err := r.repo.Client.Do(req)
	if err != nil {
		return nil, classify(err, "read blob %s", layer)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK:
		if _, err := io.CopyN(io.Discard, resp.Body, off); err != nil {
			return nil, classify(err, "read blob %s", layer)
		}
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, errs.New(errs.Unauthorized, pkg, "read blob %s: the registry answered %s", layer, resp.Status)
	case http.StatusNotFound:
		return nil, errs.New(errs.NotFound, pkg, "%s has no blob %s", r.where(), layer)
	default:
		return nil, fmt.Errorf("%s: read blob %s: the registry answered %s", pkg, layer, resp.Status)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(resp.Body, b); err != nil {
		return nil, errs.Wrap(errs.IntegrityError, pkg, err, "blob %s from %s is shorter than its map says", layer, r.where())
	}
	return b, nil
}

// holder finds a resolved source that holds blob d.
func (r *Remote) holder(d objects.Digest) *modelpack.Source {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.sources {
		if _, ok := s.BlobSize(d); ok {
			return s
		}
	}
	return nil
}

// Ref reads the ref: the repository, at the URL's reference.
func (r *Remote) Ref(ctx context.Context, name string) (remote.RefInfo, error) {
	if name != r.ref.Repo {
		return remote.RefInfo{}, remote.NoRef(r.where(), name)
	}
	s, err := r.source(ctx, r.ref.Reference())
	if err != nil {
		return remote.RefInfo{}, err
	}
	return s.Ref(ctx, name)
}

// Tag reads the registry tag tag of the repository.
func (r *Remote) Tag(ctx context.Context, name, tag string) (objects.Digest, error) {
	if name != r.ref.Repo || !validTag(tag) {
		return objects.Digest{}, remote.NoTag(r.where(), name, tag)
	}
	s, err := r.source(ctx, tag)
	if err != nil {
		return objects.Digest{}, err
	}
	return s.Tag(ctx, name, tag)
}

// GetManifest returns an mstore manifest some resolved artifact carries.
func (r *Remote) GetManifest(ctx context.Context, d objects.Digest) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.sources {
		if s.Digest == d {
			return s.Encoded, nil
		}
	}
	return nil, remote.NoManifest(r.where(), d)
}

// HasBlobs reports the blobs the resolved artifacts hold.
func (r *Remote) HasBlobs(_ context.Context, ds []objects.Digest) ([]bool, error) {
	if len(ds) > remote.MaxHasBlobs {
		return nil, errs.New(errs.SizeLimitExceeded, pkg, "asked about %d blobs at once (at most %d)", len(ds), remote.MaxHasBlobs)
	}
	out := make([]bool, len(ds))
	for i, d := range ds {
		out[i] = r.holder(d) != nil
	}
	return out, nil
}

// GetBlob reads a range of a blob out of the file layer that holds it.
func (r *Remote) GetBlob(ctx context.Context, d objects.Digest, off, n int64) ([]byte, error) {
	s := r.holder(d)
	if s == nil {
		return nil, remote.NoBlob(r.where(), d)
	}
	return s.GetBlob(ctx, d, off, n)
}

// GetBlobs reads whole blobs, neighbours in one file with one request;
// blobs of several resolved versions are read from each in turn.
func (r *Remote) GetBlobs(ctx context.Context, ds []objects.Digest) ([][]byte, error) {
	if err := remote.CheckBatch(len(ds), 0); err != nil {
		return nil, err
	}
	var total int64
	var sources []*modelpack.Source
	idx := map[*modelpack.Source][]int{}
	for i, d := range ds {
		s := r.holder(d)
		if s == nil {
			return nil, remote.NoBlob(r.where(), d)
		}
		size, _ := s.BlobSize(d)
		total += size
		if idx[s] == nil {
			sources = append(sources, s)
		}
		idx[s] = append(idx[s], i)
	}
	if err := remote.CheckBatch(len(ds), total); err != nil {
		return nil, err
	}
	out := make([][]byte, len(ds))
	for _, s := range sources {
		ask := make([]objects.Digest, len(idx[s]))
		for j, i := range idx[s] {
			ask[j] = ds[i]
		}
		got, err := s.GetBlobs(ctx, ask)
		if err != nil {
			return nil, err
		}
		for j, i := range idx[s] {
			out[i] = got[j]
		}
	}
	return out, nil
}

func (r *Remote) pushHere() error {
	return errs.New(errs.UnsupportedVersion, pkg, "a registry takes whole ModelPack artifacts, not mstore blobs: `mstore push %s:TAG REF`", r.where())
}

// PutBlobs is refused: a registry's layers are whole files (see Push).
func (r *Remote) PutBlobs(context.Context, []remote.Blob) error { return r.pushHere() }

// PutManifest is refused (see Push).
func (r *Remote) PutManifest(context.Context, objects.Digest, []byte) (bool, error) {
	return false, r.pushHere()
}

// MoveRef is refused: a registry has no compare-and-swap on tags.
func (r *Remote) MoveRef(context.Context, string, objects.Digest, objects.Digest, string) error {
	return errs.New(errs.UnsupportedVersion, pkg, "%s: a registry cannot move a tag by compare-and-swap, so mstore moves no ref there; push a tag: `mstore push %s:TAG REF`", r.where(), r.where())
}

// CreateTag is refused (see Push).
func (r *Remote) CreateTag(context.Context, string, string, objects.Digest) (bool, error) {
	return false, r.pushHere()
}

// Close does nothing.
func (r *Remote) Close() error { return nil }
