package httpremote

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
)

// APIVersion is the protocol version this build speaks.
const APIVersion = 1

// Capabilities is the document of GET /v1/capabilities.
type Capabilities struct {
	API           string `json:"api"` // "mstore"
	Versions      []int  `json:"versions"`
	Push          bool   `json:"push"`
	MaxBatchBlobs int    `json:"max_batch_blobs"`
	MaxBatchBytes int64  `json:"max_batch_bytes"`
	MaxHasBlobs   int    `json:"max_has_blobs"`
	// Codings lists the blob codings the server sends and takes as they
	// are kept (POST /v1/blobs/get with "accept", POST /v1/blobs/coded);
	// a server without it moves raw bytes only.
	Codings []string `json:"codings,omitempty"`
}

type digestList struct {
	Digests []objects.Digest `json:"digests"`
	// Accept asks for blobs in these codings, when kept so (only sent to
	// a server whose capabilities list them: an older one refuses the
	// field).
	Accept []string `json:"accept,omitempty"`
}

type rawList struct {
	Raw []objects.Digest `json:"raw"`
}

// A coded frame: coding(1) raw size(8) base(32) stored length(8) stored
// bytes; an upload's frame starts with the digest(32).
const codedHead = 1 + 8 + 32 + 8

const codedBlobsType = "application/vnd.mstore.coded-blobs"

var wireCodings = []string{remote.CodingRaw, remote.CodingGrouped, remote.CodingDelta}

func codingByte(c string) (byte, bool) {
	for i, w := range wireCodings {
		if w == c {
			return byte(i), true
		}
	}
	return 0, false
}

func appendCoded(b []byte, blob remote.CodedBlob, withDigest bool) []byte {
	if withDigest {
		b = append(b, blob.Digest[:]...)
	}
	c, _ := codingByte(blob.Coding)
	b = append(b, c)
	b = binary.BigEndian.AppendUint64(b, uint64(blob.Size))
	b = append(b, blob.Base[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(blob.Data)))
	return append(b, blob.Data...)
}

// readCoded reads one coded frame (its digest first when withDigest),
// refusing sizes over a chunk and a total over the batch bound. A read
// that fails is the reader's error as it is (io.EOF before a frame).
func readCoded(rd io.Reader, withDigest bool, total *int64) (remote.CodedBlob, error) {
	var b remote.CodedBlob
	if withDigest {
		if n, err := io.ReadFull(rd, b.Digest[:]); err != nil {
			if n > 0 {
				err = noEOF(err)
			}
			return b, err
		}
	}
	var head [codedHead]byte
	if _, err := io.ReadFull(rd, head[:]); err != nil {
		return b, noEOF(err)
	}
	if int(head[0]) >= len(wireCodings) {
		return b, errs.New(errs.UnsupportedVersion, "remote", "coded blob frame: unknown coding %d", head[0])
	}
	b.Coding = wireCodings[head[0]]
	b.Size = int64(binary.BigEndian.Uint64(head[1:]))
	b.Base = objects.Digest(head[9:41])
	n := binary.BigEndian.Uint64(head[41:])
	if b.Size < 0 || b.Size > objects.ChunkSize || n > objects.ChunkSize {
		return b, errs.New(errs.SizeLimitExceeded, "remote", "coded blob of %d bytes (%d raw); blobs are at most %d", n, b.Size, objects.ChunkSize)
	}
	if *total += int64(n); *total > remote.MaxBatchBytes {
		return b, errs.New(errs.SizeLimitExceeded, "remote", "coded batch over %d bytes", remote.MaxBatchBytes)
	}
	b.Data = make([]byte, n)
	if _, err := io.ReadFull(rd, b.Data); err != nil {
		return b, noEOF(err)
	}
	return b, nil
}

// noEOF is a frame cut short: never the clean end of the frames.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

type haveList struct {
	Have []bool `json:"have"`
}

type refDoc struct {
	Name    string           `json:"name"`
	Current objects.Digest   `json:"current"`
	History []objects.Digest `json:"history"`
}

type moveDoc struct {
	From    *objects.Digest `json:"from"` // null: the ref must not exist
	To      objects.Digest  `json:"to"`
	Message string          `json:"message"`
}

type tagDoc struct {
	Digest  objects.Digest `json:"digest"`
	Created bool           `json:"created,omitempty"`
}

type errorDoc struct {
	Error struct {
		Class   string `json:"class"`
		Message string `json:"message"`
	} `json:"error"`
	Missing []objects.Digest `json:"missing,omitempty"`
}

// errUnauthorized is a request without the right token.
const classUnauthorized = "unauthorized"

func statusOf(c errs.Class) int {
	switch c {
	case errs.NotFound:
		return http.StatusNotFound
	case errs.Conflict:
		return http.StatusConflict
	case errs.IntegrityError:
		return http.StatusUnprocessableEntity
	case errs.SizeLimitExceeded:
		return http.StatusRequestEntityTooLarge
	case errs.SchemaError, errs.PathTraversal, errs.InvalidArchive:
		return http.StatusBadRequest
	case errs.UnsupportedVersion:
		return http.StatusNotImplemented
	}
	return http.StatusInternalServerError
}

func classByKey(key string) errs.Class {
	for _, c := range errs.Classes() {
		if c.Key() == key {
			return c
		}
	}
	return 0
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// A GET /v1/blobs/HEX may ask for the blob as stored: headerAcceptCodings
// lists the codings the client takes; a coded answer names its coding, raw
// size and (a delta) base in the other headers. A raw answer has none.
const (
	headerAcceptCodings = "X-Mstore-Accept-Codings"
	headerCoding        = "X-Mstore-Coding"
	headerRawSize       = "X-Mstore-Raw-Size"
	headerBase          = "X-Mstore-Base"
)

func setCodedHeaders(h http.Header, b remote.CodedBlob) {
	if b.Coding == remote.CodingRaw || b.Coding == "" {
		return
	}
	h.Set(headerCoding, b.Coding)
	h.Set(headerRawSize, strconv.FormatInt(b.Size, 10))
	if b.Coding == remote.CodingDelta {
		h.Set(headerBase, b.Base.String())
	}
}

// codedFromHeaders reads what setCodedHeaders wrote, and bounds the body.
func codedFromHeaders(d objects.Digest, h http.Header, length int64) (remote.CodedBlob, error) {
	b := remote.CodedBlob{Digest: d, Coding: remote.CodingRaw}
	if length > objects.ChunkSize {
		return b, fmt.Errorf("blob %s: answer of %d bytes (blobs are at most %d)", d.Short(), length, objects.ChunkSize)
	}
	c := h.Get(headerCoding)
	if c == "" {
		return b, nil
	}
	if _, ok := codingByte(c); !ok {
		return b, fmt.Errorf("blob %s: unknown coding %q", d.Short(), c)
	}
	size, err := strconv.ParseInt(h.Get(headerRawSize), 10, 64)
	if err != nil || size < 0 || size > objects.ChunkSize {
		return b, fmt.Errorf("blob %s: raw size %q", d.Short(), h.Get(headerRawSize))
	}
	b.Coding, b.Size = c, size
	if c == remote.CodingDelta {
		if b.Base, err = objects.ParseDigest(h.Get(headerBase)); err != nil {
			return b, fmt.Errorf("blob %s: base %q", d.Short(), h.Get(headerBase))
		}
	}
	return b, nil
}
