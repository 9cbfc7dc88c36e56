package refs

import (
	"encoding/binary"
	"time"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// recordVersion leads every value refs writes, so that a later build can
// change an encoding and still read (or at least refuse clearly) old values.
const recordVersion = 1

const (
	timeLen      = 8 + 4 // Unix seconds, then nanoseconds
	refRecordLen = 1 + 32 + 8 + timeLen
	entryMinLen  = 1 + 32 + 32 + timeLen
	tagRecordLen = 1 + 32
)

// refRecord is the value under a name in the "refs" bucket. It repeats what
// the newest history entry and the entry count say, so that List and Current
// never open a history bucket.
type refRecord struct {
	current objects.Digest
	entries uint64
	moved   time.Time
}

func putTime(b []byte, t time.Time) {
	binary.BigEndian.PutUint64(b, uint64(t.Unix()))
	binary.BigEndian.PutUint32(b[8:], uint32(t.Nanosecond()))
}

func getTime(b []byte) time.Time {
	return time.Unix(int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint32(b[8:]))).UTC()
}

func (r refRecord) encode() []byte {
	b := make([]byte, refRecordLen)
	b[0] = recordVersion
	copy(b[1:], r.current[:])
	binary.BigEndian.PutUint64(b[33:], r.entries)
	putTime(b[41:], r.moved)
	return b
}

// checkRecord refuses a value of another version or of a wrong length; what
// names the value in the message.
func checkRecord(v []byte, minLen int, exact bool, what string) error {
	if len(v) > 0 && v[0] != recordVersion {
		return errs.New(errs.UnsupportedVersion, pkg, "%s: record version %d (this build reads %d)", what, v[0], recordVersion)
	}
	if len(v) < minLen || exact && len(v) != minLen {
		return errs.New(errs.IntegrityError, pkg, "%s: record is %d bytes, want %d", what, len(v), minLen)
	}
	return nil
}

func decodeRef(name string, v []byte) (refRecord, error) {
	if err := checkRecord(v, refRecordLen, true, "ref "+name); err != nil {
		return refRecord{}, err
	}
	var r refRecord
	copy(r.current[:], v[1:33])
	r.entries = binary.BigEndian.Uint64(v[33:])
	r.moved = getTime(v[41:])
	return r, nil
}

func seqKey(seq uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, seq)
	return k
}

func encodeEntry(e Entry) []byte {
	b := make([]byte, entryMinLen+len(e.Message))
	b[0] = recordVersion
	copy(b[1:], e.Digest[:])
	copy(b[33:], e.Previous[:])
	putTime(b[65:], e.Time)
	copy(b[entryMinLen:], e.Message)
	return b
}

// decodeEntry copies everything out of k and v, which bbolt owns.
func decodeEntry(name string, k, v []byte) (Entry, error) {
	if len(k) != 8 {
		return Entry{}, errs.New(errs.IntegrityError, pkg, "history of %q: key of %d bytes, want 8", name, len(k))
	}
	seq := binary.BigEndian.Uint64(k)
	if err := checkRecord(v, entryMinLen, false, "history of "+name); err != nil {
		return Entry{}, err
	}
	e := Entry{Seq: seq, Time: getTime(v[65:]), Message: string(v[entryMinLen:])}
	copy(e.Digest[:], v[1:33])
	copy(e.Previous[:], v[33:65])
	return e, nil
}

func encodeTag(d objects.Digest) []byte {
	b := make([]byte, tagRecordLen)
	b[0] = recordVersion
	copy(b[1:], d[:])
	return b
}

func decodeTag(what string, v []byte) (objects.Digest, error) {
	var d objects.Digest
	if err := checkRecord(v, tagRecordLen, true, "tag "+what); err != nil {
		return d, err
	}
	copy(d[:], v[1:])
	return d, nil
}
