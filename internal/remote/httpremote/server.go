package httpremote

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/remote"
)

// BlobOpener is what a backend may offer beside remote.Remote: a blob as
// stored, unverified, so that serve can hand a file to sendfile instead of
// reading it. Clients check every blob's digest, so nothing is lost.
type BlobOpener interface {
	OpenBlob(ctx context.Context, d objects.Digest) (io.ReadSeekCloser, error)
}

// CodedOpener is what a remote.Coder backend may offer for one blob: it
// opened as OpenBlob opens it when it is raw, else its stored bytes when
// kept in one of accept (or decoded, when not). meta is the blob without
// its Data.
type CodedOpener interface {
	OpenCoded(ctx context.Context, d objects.Digest, accept []string) (f io.ReadSeekCloser, meta remote.CodedBlob, err error)
}

// ServerOptions say what a server serves and to whom.
type ServerOptions struct {
	Backend remote.Remote
	// AllowPush enables the write endpoints; they need PushToken.
	AllowPush bool
	PushToken string
	// ReadToken, when set, is needed (or PushToken) to read anything.
	ReadToken string
	// MaxConcurrent bounds the requests served at once; zero means 64.
	MaxConcurrent int
	// QueueWait is how long a request waits for one of those before it is
	// told to retry (503, Retry-After); zero means 10 s.
	QueueWait time.Duration
	// Web, when set, serves every GET outside /v1/ (serve's read-only web
	// view), behind the same read token and request limit.
	Web http.Handler
}

// Limits of one request.
const (
	maxJSONBody     = 4 << 20
	maxBlobsBody    = remote.MaxBatchBytes + remote.MaxBatchBlobs*40
	maxHeaderBytes  = 32 << 10
	immutableHeader = "public, max-age=31536000, immutable"
)

type server struct {
	o    ServerOptions
	slot chan struct{}
	push [32]byte
	read [32]byte

	locks heldLocks // locks.go
}

// NewHandler returns the handler of the /v1/ protocol over o.Backend.
func NewHandler(o ServerOptions) http.Handler {
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = 64
	}
	if o.QueueWait <= 0 {
		o.QueueWait = 10 * time.Second
	}
	s := &server{o: o, slot: make(chan struct{}, o.MaxConcurrent)}
	s.push, s.read = sha256.Sum256([]byte(o.PushToken)), sha256.Sum256([]byte(o.ReadToken))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/capabilities", s.readable(api(s.capabilities)))
	mux.HandleFunc("POST /v1/blobs/has", s.readable(api(s.hasBlobs)))
	mux.HandleFunc("GET /v1/blobs/{digest}", s.readable(api(s.getBlob)))
	mux.HandleFunc("POST /v1/blobs/get", s.readable(api(s.getBlobs)))
	mux.HandleFunc("POST /v1/blobs", s.pushable(api(s.putBlobs)))
	mux.HandleFunc("POST /v1/blobs/coded", s.pushable(api(s.putCoded)))
	mux.HandleFunc("GET /v1/manifests/{digest}", s.readable(api(s.getManifest)))
	mux.HandleFunc("PUT /v1/manifests/{digest}", s.pushable(api(s.putManifest)))
	mux.HandleFunc("GET /v1/refs", s.readable(api(s.getRef)))
	mux.HandleFunc("POST /v1/refs", s.pushable(api(s.moveRef)))
	mux.HandleFunc("GET /v1/tags", s.readable(api(s.getTag)))
	mux.HandleFunc("PUT /v1/tags", s.pushable(api(s.createTag)))
	mux.HandleFunc("POST /v1/locks/push", s.pushable(api(s.lockPush)))
	mux.HandleFunc("DELETE /v1/locks/push/{id}", s.pushable(api(s.unlockPush)))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if o.Web != nil && r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/v1/") {
			s.readable(o.Web.ServeHTTP)(w, r)
			return
		}
		fail(w, errs.New(errs.NotFound, "serve", "no endpoint %s %s (this server speaks /v1/; see /v1/capabilities)", r.Method, r.URL.Path))
	})
	return s.limit(s.touchLocks(mux))
}

// NewServer wraps h in an http.Server with bounded headers and timeouts.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute,
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// limit bounds the requests in flight; one that waits too long for a slot
// is told to come back (503 with Retry-After), which clients honour.
func (s *server) limit(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(s.o.QueueWait)
		defer t.Stop()
		select {
		case s.slot <- struct{}{}:
			defer func() { <-s.slot }()
			h.ServeHTTP(w, r)
		case <-t.C:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case <-r.Context().Done():
		}
	})
}

func (s *server) tokenIs(r *http.Request, want [32]byte) bool {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return false
	}
	got := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

func unauthorized(w http.ResponseWriter, msg string) {
	var doc errorDoc
	doc.Error.Class, doc.Error.Message = classUnauthorized, msg
	w.Header().Set("WWW-Authenticate", `Bearer realm="mstore"`)
	writeJSON(w, http.StatusUnauthorized, doc)
}

func (s *server) readable(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.o.ReadToken != "" && !s.tokenIs(r, s.read) && !(s.o.AllowPush && s.tokenIs(r, s.push)) {
			unauthorized(w, "this server needs a token to read (--token-file or MSTORE_TOKEN)")
			return
		}
		h(w, r)
	}
}

func (s *server) pushable(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.o.AllowPush {
			var doc errorDoc
			doc.Error.Class, doc.Error.Message = "read_only", "this server is read-only (serve --allow-push to accept pushes)"
			writeJSON(w, http.StatusForbidden, doc)
			return
		}
		if s.o.PushToken == "" || !s.tokenIs(r, s.push) {
			unauthorized(w, "push needs the server's token (--token-file or MSTORE_TOKEN)")
			return
		}
		h(w, r)
	}
}

// api turns a handler that returns its failure into an http.HandlerFunc
// that answers it with its class (fail).
func api(h func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			fail(w, err)
		}
	}
}

func fail(w http.ResponseWriter, err error) {
	var doc errorDoc
	c := errs.ClassOf(err)
	status := statusOf(c)
	doc.Error.Class, doc.Error.Message = c.Key(), err.Error()
	if errors.Is(err, context.Canceled) {
		status = 499
	}
	var missing *remote.MissingBlobsError
	if errors.As(err, &missing) {
		doc.Missing = missing.Missing
	}
	writeJSON(w, status, doc)
}

func digestParam(r *http.Request) (objects.Digest, error) {
	return objects.ParseDigest(r.PathValue("digest"))
}

func nameParam(r *http.Request) (string, error) {
	return refs.ParseName(r.URL.Query().Get("name"))
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxJSONBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return errs.New(errs.SizeLimitExceeded, "serve", "request body over %d bytes", maxJSONBody)
		}
		return errs.Wrap(errs.SchemaError, "serve", err, "request body")
	}
	return nil
}

func (s *server) capabilities(w http.ResponseWriter, r *http.Request) error {
	caps := Capabilities{API: "mstore", Versions: []int{APIVersion}, Push: s.o.AllowPush,
		MaxBatchBlobs: remote.MaxBatchBlobs, MaxBatchBytes: remote.MaxBatchBytes, MaxHasBlobs: remote.MaxHasBlobs}
	if c, ok := s.o.Backend.(remote.Coder); ok {
		caps.Codings = c.Codings()
	}
	writeJSON(w, http.StatusOK, caps)
	return nil
}

func (s *server) hasBlobs(w http.ResponseWriter, r *http.Request) error {
	var req digestList
	if err := readJSON(w, r, &req); err != nil {
		return err
	}
	have, err := s.o.Backend.HasBlobs(r.Context(), req.Digests)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, haveList{Have: have})
	return nil
}

func (s *server) getBlob(w http.ResponseWriter, r *http.Request) error {
	d, err := digestParam(r)
	if err != nil {
		return err
	}
	var content io.ReadSeeker
	if o, ok := s.o.Backend.(CodedOpener); ok && r.Header.Get(headerAcceptCodings) != "" {
		var accept []string
		for _, a := range strings.Split(r.Header.Get(headerAcceptCodings), ",") {
			accept = append(accept, strings.TrimSpace(a))
		}
		f, meta, err := o.OpenCoded(r.Context(), d, accept)
		if err != nil {
			return err
		}
		defer f.Close()
		setCodedHeaders(w.Header(), meta)
		if meta.Coding != remote.CodingRaw {
			r.Header.Del("Range") // a range of coded bytes means nothing
		}
		content = f
	} else if o, ok := s.o.Backend.(BlobOpener); ok {
		f, err := o.OpenBlob(r.Context(), d)
		if err != nil {
			return err
		}
		defer f.Close()
		content = f
	} else {
		data, err := s.o.Backend.GetBlob(r.Context(), d, 0, -1)
		if err != nil {
			return err
		}
		content = bytes.NewReader(data)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", immutableHeader)
	w.Header().Set("ETag", `"`+d.String()+`"`)
	http.ServeContent(w, r, "", time.Time{}, content)
	return nil
}

func (s *server) getBlobs(w http.ResponseWriter, r *http.Request) error {
	var req digestList
	if err := readJSON(w, r, &req); err != nil {
		return err
	}
	if err := remote.CheckBatch(len(req.Digests), 0); err != nil {
		return err
	}
	if c, ok := s.o.Backend.(remote.Coder); ok && len(req.Accept) > 0 {
		return s.getCoded(w, r, c, req)
	}
	data, err := s.o.Backend.GetBlobs(r.Context(), req.Digests)
	if err != nil {
		return err
	}
	var total int64
	for _, b := range data {
		total += int64(8 + len(b))
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(total, 10))
	for _, b := range data {
		w.Write(binary.BigEndian.AppendUint64(nil, uint64(len(b))))
		w.Write(b)
	}
	return nil
}

func (s *server) putBlobs(w http.ResponseWriter, r *http.Request) error {
	body := http.MaxBytesReader(w, r.Body, maxBlobsBody)
	blobs, err := readFrames(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			err = errs.New(errs.SizeLimitExceeded, "serve", "upload over %d bytes", maxBlobsBody)
		}
		return err
	}
	if err := s.o.Backend.PutBlobs(r.Context(), blobs); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// readFrames reads an upload: digest(32) len(8) bytes, repeated.
func readFrames(rd io.Reader) ([]remote.Blob, error) {
	var out []remote.Blob
	var total int64
	var head [40]byte
	for {
		if _, err := io.ReadFull(rd, head[:]); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, errs.Wrap(errs.SchemaError, "serve", err, "upload frame header")
		}
		n := binary.BigEndian.Uint64(head[32:])
		if n > objects.ChunkSize {
			return nil, errs.New(errs.SizeLimitExceeded, "serve", "uploaded blob of %d bytes (blobs are at most %d)", n, objects.ChunkSize)
		}
		total += int64(n)
		if err := remote.CheckBatch(len(out)+1, total); err != nil {
			return nil, err
		}
		data := make([]byte, n)
		if _, err := io.ReadFull(rd, data); err != nil {
			return nil, errs.Wrap(errs.SchemaError, "serve", err, "upload truncated")
		}
		out = append(out, remote.Blob{Digest: objects.Digest(head[:32]), Data: data})
	}
}

func (s *server) getManifest(w http.ResponseWriter, r *http.Request) error {
	d, err := digestParam(r)
	if err != nil {
		return err
	}
	b, err := s.o.Backend.GetManifest(r.Context(), d)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", immutableHeader)
	// The length lets the client read a large manifest into one buffer.
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Write(b)
	return nil
}

func (s *server) putManifest(w http.ResponseWriter, r *http.Request) error {
	d, err := digestParam(r)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, remote.MaxManifestBytes))
	if err != nil {
		return errs.Wrap(errs.SizeLimitExceeded, "serve", err, "manifest upload")
	}
	created, err := s.o.Backend.PutManifest(r.Context(), d, b)
	if err != nil {
		return err
	}
	if created {
		w.WriteHeader(http.StatusCreated)
		return nil
	}
	w.WriteHeader(http.StatusNoContent) // it was there already
	return nil
}

func (s *server) getRef(w http.ResponseWriter, r *http.Request) error {
	name, err := nameParam(r)
	if err != nil {
		return err
	}
	info, err := s.o.Backend.Ref(r.Context(), name)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, refDoc{Name: info.Name, Current: info.Current, History: info.History})
	return nil
}

func (s *server) moveRef(w http.ResponseWriter, r *http.Request) error {
	name, err := nameParam(r)
	if err != nil {
		return err
	}
	var req moveDoc
	if err := readJSON(w, r, &req); err != nil {
		return err
	}
	var from objects.Digest
	if req.From != nil {
		from = *req.From
	}
	if err := s.o.Backend.MoveRef(r.Context(), name, from, req.To, req.Message); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) getTag(w http.ResponseWriter, r *http.Request) error {
	name, err := nameParam(r)
	if err != nil {
		return err
	}
	tag, err := refs.ParseTag(r.URL.Query().Get("tag"))
	if err != nil {
		return err
	}
	d, err := s.o.Backend.Tag(r.Context(), name, tag)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, tagDoc{Digest: d})
	return nil
}

func (s *server) createTag(w http.ResponseWriter, r *http.Request) error {
	name, err := nameParam(r)
	if err != nil {
		return err
	}
	tag, err := refs.ParseTag(r.URL.Query().Get("tag"))
	if err != nil {
		return err
	}
	var req tagDoc
	if err := readJSON(w, r, &req); err != nil {
		return err
	}
	created, err := s.o.Backend.CreateTag(r.Context(), name, tag, req.Digest)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, tagDoc{Digest: req.Digest, Created: created})
	return nil
}

// getCoded answers a batch read that accepts codings: each blob as the
// store keeps it, in one of them, else raw.
func (s *server) getCoded(w http.ResponseWriter, r *http.Request, c remote.Coder, req digestList) error {
	blobs, err := c.GetCoded(r.Context(), req.Digests, req.Accept)
	if err != nil {
		return err
	}
	var total int64
	for _, b := range blobs {
		total += int64(codedHead + len(b.Data))
	}
	w.Header().Set("Content-Type", codedBlobsType)
	w.Header().Set("Content-Length", strconv.FormatInt(total, 10))
	var buf []byte
	for _, b := range blobs {
		buf = appendCoded(buf[:0], b, false)
		w.Write(buf)
	}
	return nil
}

// putCoded takes an upload of blobs as the client's store keeps them; the
// backend decodes and checks each. Those it cannot take coded are named in
// the answer, for the client to send raw.
func (s *server) putCoded(w http.ResponseWriter, r *http.Request) error {
	c, ok := s.o.Backend.(remote.Coder)
	if !ok {
		return errs.New(errs.UnsupportedVersion, "serve", "this server takes raw blobs only (POST /v1/blobs)")
	}
	body := http.MaxBytesReader(w, r.Body, maxBlobsBody+remote.MaxBatchBlobs*(32+codedHead))
	var blobs []remote.CodedBlob
	var total int64
	for {
		b, err := readCoded(body, true, &total)
		if err == io.EOF {
			break
		}
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			err = errs.New(errs.SizeLimitExceeded, "serve", "upload over its bound")
		case err != nil && errs.ClassOf(err) == 0:
			err = errs.Wrap(errs.SchemaError, "serve", err, "coded upload")
		}
		if err == nil && len(blobs) == remote.MaxBatchBlobs {
			err = remote.CheckBatch(len(blobs)+1, total)
		}
		if err != nil {
			return err
		}
		blobs = append(blobs, b)
	}
	raw, err := c.PutCoded(r.Context(), blobs)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rawList{Raw: raw})
	return nil
}
