package store

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/bytegroup"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// Coding says how a blob's bytes are coded on disk, apart from where they
// lie (Encoding). A record written before codings existed has none: raw.
type Coding byte

const (
	// CodingRaw is the blob's bytes as they are. A record keeps raw as the
	// zero Coding: records from before codings have no coding field, and
	// records compare equal whichever way they were made.
	CodingRaw Coding = iota + 1
	// CodingGrouped is the blob's bytes split into byte planes and entropy
	// coded (internal/bytegroup).
	CodingGrouped
	// CodingDelta is the blob against its base blob (the same-offset chunk
	// of a tensor of the same dtype and length): their XOR, or the zigzag
	// difference of their elements, byte-grouped and coded; the coded
	// bytes' header says which (bytegroup.EncodeDelta), so deltas written
	// before the difference existed read as they did. A base is never
	// itself a delta: a read needs at most two blobs.
	CodingDelta
)

func (c Coding) String() string {
	switch c {
	case 0, CodingRaw:
		return "raw"
	case CodingGrouped:
		return "grouped"
	case CodingDelta:
		return "delta"
	}
	return fmt.Sprintf("coding(%d)", byte(c))
}

// ParseCoding is String's inverse (the journal spells codings by name).
func ParseCoding(s string) (Coding, bool) {
	for _, c := range []Coding{CodingRaw, CodingGrouped, CodingDelta} {
		if c.String() == s {
			return c, true
		}
	}
	return 0, false
}

func (c Coding) coded() bool { return c == CodingGrouped || c == CodingDelta }

// Coded reports whether the record's bytes on disk are not the raw bytes.
func (r BlobRecord) Coded() bool { return r.Coding.coded() }

// StoredSize is the bytes the blob takes on disk.
func (r BlobRecord) StoredSize() int64 {
	if r.Coded() {
		return r.Stored
	}
	return r.Size
}

// Record trailer of a coded blob, after the location: coding(1) stored(8)
// [base(32) for a delta]. A raw blob has none, as before codings.
func appendCoding(b []byte, r BlobRecord) []byte {
	if !r.Coded() {
		return b
	}
	b = append(b, byte(r.Coding))
	b = append(b, u64(uint64(r.Stored))...)
	if r.Coding == CodingDelta {
		b = append(b, r.Base[:]...)
	}
	return b
}

// decodeCoding parses the trailer t of r's record.
func decodeCoding(r *BlobRecord, t []byte) bool {
	if len(t) == 0 { // raw: the zero Coding, as in records from before codings
		return true
	}
	if r.Encoding != EncodingPacked || len(t) < 9 {
		return false // coded blobs live in packs only (the journal places them)
	}
	r.Coding, r.Stored = Coding(t[0]), int64(getU64(t[1:9]))
	switch {
	case r.Coding == CodingGrouped && len(t) == 9:
	case r.Coding == CodingDelta && len(t) == 9+32:
		copy(r.Base[:], t[9:])
	default:
		return false
	}
	// Coding is kept only when it shrinks the blob.
	return r.Stored > 0 && r.Stored < r.Size
}

// attachBase fills in the record of a delta's base, when the index has one.
func attachBase(tx *bolt.Tx, r *BlobRecord) error {
	if r.Coding != CodingDelta {
		return nil
	}
	v := tx.Bucket(bucketBlobs).Get(r.Base[:])
	if v == nil {
		return nil // the read reports it
	}
	b, err := decodeBlobRecord(r.Base, v)
	if err != nil {
		return err
	}
	r.BaseRec = &b
	return nil
}

// EncodeBlob returns the smallest coding of raw found: byte-grouped in
// width planes, or, when base (the raw bytes of a blob that is not itself a
// delta) is given, the XOR delta against it, whichever is smaller. It
// returns CodingRaw and nil when neither is smaller than raw, and for a
// blob larger than a chunk (a manifest's: 28 MB for 100,000 tensors): the
// decoder holds a plane to a chunk's size (bytegroup's zstd window and
// memory bounds, set for hostile input), so such a coding would never
// decode, and repack refused every manifest blob of that size as a bug in
// the coder.
func EncodeBlob(raw []byte, width int, base []byte) (Coding, []byte) {
	return AppendBlob(nil, raw, width, base)
}

// AppendBlob is EncodeBlob coding into dst[:0] (grown as needed), which the
// caller may reuse once it is done with the result (repack codes every
// blob of a store through a few such buffers).
func AppendBlob(dst, raw []byte, width int, base []byte) (Coding, []byte) {
	if len(raw) > objects.ChunkSize {
		return CodingRaw, nil
	}
	if base == nil {
		if g := bytegroup.AppendEncode(dst[:0], raw, width); len(g) < len(raw) {
			return CodingGrouped, g
		}
		return CodingRaw, nil
	}
	best, coding := []byte(nil), CodingRaw
	delta := bytegroup.AppendDelta(dst[:0], raw, base, width)
	if len(delta) < len(raw) {
		best, coding = delta, CodingDelta
	}
	if len(delta)*100 < len(raw)*62 {
		return coding, best // grouped alone does not get there on weights (~0.67)
	}
	if best != nil && !bytegroup.GroupedMayBeat(raw, width, len(best)) {
		return coding, best // a sample says grouped would lose: not coded whole
	}
	if g := bytegroup.Encode(raw, width); len(g) < len(raw) && (best == nil || len(g) < len(best)) {
		best, coding = g, CodingGrouped
	}
	return coding, best
}

// EncodeDelta returns the stored bytes of raw as a CodingDelta blob against
// base (the raw bytes of a blob that is not itself a delta), whatever
// their size: the caller keeps them only when they are smaller than what
// it has.
func EncodeDelta(raw []byte, width int, base []byte) []byte {
	return bytegroup.EncodeDelta(raw, base, width)
}

// AppendDelta is EncodeDelta coding into dst[:0], as AppendBlob.
func AppendDelta(dst, raw []byte, width int, base []byte) []byte {
	return bytegroup.AppendDelta(dst[:0], raw, base, width)
}

// decodeBlob turns the stored bytes of rec into its raw bytes in buf
// (grown as needed); base is the raw bytes of its base, for a delta.
func decodeBlob(rec BlobRecord, stored, base, buf []byte) ([]byte, error) {
	var out []byte
	var err error
	if rec.Coding == CodingDelta {
		out, err = bytegroup.DecodeDelta(buf, stored, int(rec.Size), base)
	} else {
		out, err = bytegroup.DecodeWith(buf, stored, int(rec.Size), nil)
	}
	if err != nil {
		return nil, errs.Wrap(errs.IntegrityError, "store", err, "blob %s: its %s bytes do not decode (run `mstore fsck`)", rec.Digest.Short(), rec.Coding)
	}
	return out, nil
}

// CheckDecodes checks that stored, the bytes just coded from raw as
// rec.Coding (against base, the raw bytes of rec.Base, for a delta),
// decode to raw again, before they replace raw in the store: a coder's
// mistake must fail its write, not the next checkout once the raw copy is
// gone. raw must be bytes whose digest was checked and that no one can
// change since (a private copy, not a mapping). buf is scratch, grown as
// needed and returned for reuse.
func CheckDecodes(rec BlobRecord, stored, raw, base, buf []byte) ([]byte, error) {
	const refused = "blob %s: its %s coding does not decode to its bytes, so it stays as it was (a bug in mstore's coder: please report it)"
	if rec.Coding == CodingGrouped && int64(len(raw)) == rec.Size {
		// Its planes are compared with raw as they are joined.
		buf, err := bytegroup.Matches(buf[:0], stored, raw)
		if err != nil { // ErrMismatch, or a coding that does not decode
			return buf, errs.Wrap(errs.IntegrityError, "store", err, refused, rec.Digest.Short(), rec.Coding)
		}
		return buf, nil
	}
	out, err := decodeBlob(rec, stored, base, buf[:0])
	if err != nil {
		return buf, errs.Wrap(errs.IntegrityError, "store", err, refused, rec.Digest.Short(), rec.Coding)
	}
	if !bytes.Equal(out, raw) {
		return out[:0], errs.New(errs.IntegrityError, "store", refused, rec.Digest.Short(), rec.Coding)
	}
	return out[:0], nil
}

// baseOf checks that a delta's base is known and not itself a delta.
func baseOf(rec BlobRecord) (BlobRecord, error) {
	if rec.BaseRec == nil {
		return BlobRecord{}, errs.New(errs.IntegrityError, "store", "blob %s is a delta against %s, which the index does not record (run `mstore fsck`)", rec.Digest.Short(), rec.Base.Short())
	}
	if rec.BaseRec.Coding == CodingDelta || rec.BaseRec.Digest != rec.Base {
		return BlobRecord{}, errs.New(errs.IntegrityError, "store", "blob %s is a delta against %s, which is itself a delta (run `mstore fsck`)", rec.Digest.Short(), rec.Base.Short())
	}
	return *rec.BaseRec, nil
}

// CodingStats is what one coding holds.
type CodingStats struct {
	Blobs       int     `json:"blobs"`
	RawBytes    int64   `json:"raw_bytes"`
	StoredBytes int64   `json:"stored_bytes"`
	Ratio       float64 `json:"ratio"` // stored / raw
}

// Standalone reads the delta rec and codes it again without its base (gc
// does this before it removes a base no version needs any more). It returns
// the new record (grouped, or raw when coding does not pay) and its stored
// bytes, for BlobWriter.PutStored.
func (r *BlobReader) Standalone(rec BlobRecord) (BlobRecord, []byte, error) {
	raw, err := r.Read(rec, nil)
	if err != nil {
		return BlobRecord{}, nil, err
	}
	width := 1
	if sp, err := r.readStored(rec, nil, false); err == nil {
		if w, err := bytegroup.Width(sp); err == nil {
			width = w
		}
	}
	coding, stored := EncodeBlob(raw, width, nil)
	out := BlobRecord{Digest: rec.Digest, Size: rec.Size, Coding: coding}
	if coding == CodingRaw {
		return out, raw, nil
	}
	if _, err := CheckDecodes(out, stored, raw, nil, nil); err != nil {
		return BlobRecord{}, nil, err
	}
	return out, stored, nil
}

// CheckStored checks that stored, the bytes of blob rec as another store
// keeps them (coded as rec.Coding; a remote that knows the coding sends
// them so), decode to the blob's raw digest, a delta against rec.BaseRec
// read from this store. The caller then writes them with PutStored; a
// remote that does not know a coding sends raw bytes, which Put checks by
// their digest as always.
func (r *BlobReader) CheckStored(rec BlobRecord, stored []byte) error {
	if !rec.Coded() {
		return objects.Verify(stored, rec.Digest, "blob "+rec.Digest.Short())
	}
	if rec.Size > objects.ChunkSize || int64(len(stored)) >= rec.Size {
		return errs.New(errs.IntegrityError, "store", "blob %s: %d coded bytes for %d raw", rec.Digest.Short(), len(stored), rec.Size)
	}
	var base []byte
	if rec.Coding == CodingDelta {
		brec, err := baseOf(rec)
		if err != nil {
			return err
		}
		if base, err = r.Read(brec, nil); err != nil {
			return err
		}
	}
	out, err := decodeBlob(rec, stored, base, nil)
	if err != nil {
		return err
	}
	return objects.Verify(out, rec.Digest, "blob "+rec.Digest.Short())
}
