package objects

import (
	"encoding/hex"

	"github.com/zeebo/blake3"

	"github.com/mstore/mstore/internal/errs"
)

// Digest is the BLAKE3-256 of some bytes.
type Digest [32]byte

// MinPrefix is the shortest digest prefix accepted on the command line.
const MinPrefix = 8

// Sum returns the digest of b.
func Sum(b []byte) Digest { return Digest(blake3.Sum256(b)) }

// ParseDigest parses 64 lowercase hex digits.
func ParseDigest(s string) (Digest, error) {
	var d Digest
	if len(s) != 64 || !decodeHex(&d, s) {
		return d, errs.New(errs.SchemaError, "objects", "digest %q: want 64 lowercase hex digits", s)
	}
	return d, nil
}

// decodeHex sets d from the 64 lowercase hex digits of src and reports
// whether they were. A manifest of 100,000 tensors spells 200,000
// digests: hex.Decode, a branch and an error check per digit, was an
// eighth of its decoding.
func decodeHex[T string | []byte](d *Digest, src T) bool {
	if len(src) != 2*len(d) {
		return false
	}
	var bad byte
	for i := range d {
		hi, lo := fromHex[src[2*i]], fromHex[src[2*i+1]]
		bad |= hi | lo
		d[i] = hi<<4 | lo
	}
	return bad&0xf0 == 0
}

// fromHex is the value of each lowercase hex digit, 0xff for every other
// byte.
var fromHex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c - '0'
	}
	for c := byte('a'); c <= 'f'; c++ {
		t[c] = c - 'a' + 10
	}
	return t
}()

// IsDigestPrefix reports whether s could be a digest or a prefix of one that
// the command line accepts: 8 to 64 lowercase hex digits.
func IsDigestPrefix(s string) bool {
	if len(s) < MinPrefix || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// Short is the 12-digit form used in listings.
func (d Digest) Short() string { return d.String()[:12] }

// IsZero reports whether d is the zero value (no digest).
func (d Digest) IsZero() bool { return d == Digest{} }

// MarshalText writes the hex form, so digests read well in JSON.
func (d Digest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses the hex form.
func (d *Digest) UnmarshalText(b []byte) error {
	p, err := ParseDigest(string(b))
	if err != nil {
		return err
	}
	*d = p
	return nil
}

// Hasher computes a digest incrementally.
type Hasher struct{ h *blake3.Hasher }

// NewHasher returns an empty hasher.
func NewHasher() *Hasher { return &Hasher{h: blake3.New()} }

func (h *Hasher) Write(p []byte) (int, error) { return h.h.Write(p) }

// Digest returns the digest of everything written so far.
func (h *Hasher) Digest() Digest {
	var d Digest
	h.h.Sum(d[:0])
	return d
}

// Reset forgets everything written.
func (h *Hasher) Reset() { h.h.Reset() }

// Verify returns an integrity_error unless b hashes to want.
func Verify(b []byte, want Digest, what string) error {
	if got := Sum(b); got != want {
		return errs.New(errs.IntegrityError, "objects", "%s: content hashes to %s, want %s", what, got.Short(), want.Short())
	}
	return nil
}

// UnmarshalJSON parses the quoted hex form directly (a manifest holds a
// digest per tensor and chunk: the generic text path costs a copy each).
func (d *Digest) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) != 66 || b[0] != '"' || b[65] != '"' {
		return errs.New(errs.SchemaError, "objects", "digest %q: want 64 lowercase hex digits", b)
	}
	return d.UnmarshalText(b[1:65])
}

// mismatchGroup is how many messages FirstMismatch hashes per call of
// SumSmall.
const mismatchGroup = 256

// FirstMismatch returns the first i whose msgs[i] does not hash to
// want[i], with what it hashes to; -1 when all do. The short messages are
// hashed eight at a time (SumSmall): a pull of a model of 100,000 small
// tensors checks 100,000 blobs.
func FirstMismatch(msgs [][]byte, want []Digest) (int, Digest) {
	if len(want) != len(msgs) {
		panic("objects: FirstMismatch takes a digest for each message")
	}
	var got [mismatchGroup]Digest
	for start := 0; start < len(msgs); start += mismatchGroup {
		part := msgs[start:min(start+mismatchGroup, len(msgs))]
		SumSmall(part, got[:len(part)])
		for k := range part {
			if got[k] != want[start+k] {
				return start + k, got[k]
			}
		}
	}
	return -1, Digest{}
}
