package journal

import (
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"slices"

	"github.com/mstore/mstore/internal/objects"
)

// A packrun record (OpPackRun) places many blobs of one pack in one line,
// where an OpPacked record places one: an add of 100,000 small tensors
// wrote 100,000 lines of about 175 B (17 MB, synced before its commit).
// Read gives each member back as the OpPacked record it stands for, so the
// rebuild reads journals of either kind, old ones included.
//
// Members is the standard, padded base64 of, for each member in offset
// order:
//
//	digest (32 bytes) | offset − end of the member before (signed varint) | size (uvarint)
//
// (the first member's "end before" is 0), about 47 characters a member.

// PackMember is one blob of a pack: Size stored bytes at Offset.
type PackMember struct {
	Digest objects.Digest
	Offset int64
	Size   int64
}

// packRunMax is the most members one record lists, so that a line stays
// under 200 KB.
const packRunMax = 4096

// packRunBound bounds every offset and size a packrun record gives.
const packRunBound = 1 << 48

// PackRuns returns the records that place members in pack (its hex id),
// sorting members by offset.
func PackRuns(pack string, members []PackMember) []Record {
	slices.SortStableFunc(members, func(a, b PackMember) int { return cmp.Compare(a.Offset, b.Offset) })
	var out []Record
	var buf []byte
	for len(members) > 0 {
		run := members[:min(len(members), packRunMax)]
		members = members[len(run):]
		buf = buf[:0]
		var end int64
		for _, m := range run {
			buf = append(buf, m.Digest[:]...)
			buf = binary.AppendVarint(buf, m.Offset-end)
			buf = binary.AppendUvarint(buf, uint64(m.Size))
			end = m.Offset + m.Size
		}
		out = append(out, Record{Op: OpPackRun, Pack: pack, Members: base64.StdEncoding.EncodeToString(buf)})
	}
	return out
}

// expandPackRun returns the OpPacked records r, an OpPackRun record, stands
// for; ok is false when its members do not decode (a checksum that passed
// over bytes this build did not write).
func expandPackRun(r Record) ([]Record, bool) {
	b, err := base64.StdEncoding.DecodeString(r.Members)
	if err != nil || r.Pack == "" || r.Digest != (objects.Digest{}) || r.Offset != 0 || r.Size != 0 {
		return nil, false
	}
	out := make([]Record, 0, min(len(b)/34, packRunMax))
	var end int64
	for len(b) > 0 {
		if len(b) < len(objects.Digest{})+2 {
			return nil, false
		}
		m := Record{Op: OpPacked, Batch: r.Batch, Pack: r.Pack, Digest: objects.Digest(b[:32])}
		b = b[32:]
		delta, n := binary.Varint(b)
		if n <= 0 {
			return nil, false
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		// Bounded (far beyond any pack) so that no sum overflows.
		if n <= 0 || size > packRunBound || delta < -end || delta > packRunBound {
			return nil, false
		}
		b = b[n:]
		m.Offset, m.Size = end+delta, int64(size)
		if m.Offset > packRunBound {
			return nil, false
		}
		end = m.Offset + m.Size
		out = append(out, m)
	}
	return out, true
}
