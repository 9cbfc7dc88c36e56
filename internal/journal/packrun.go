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
// in offset order (members at one offset in the order given).
func PackRuns(pack string, members []PackMember) []Record {
	order := byOffset(members)
	var out []Record
	var buf []byte
	for len(order) > 0 {
		run := order[:min(len(order), packRunMax)]
		order = order[len(run):]
		buf = buf[:0]
		var end int64
		for _, i := range run {
			m := members[i]
			buf = append(buf, m.Digest[:]...)
			buf = binary.AppendVarint(buf, m.Offset-end)
			buf = binary.AppendUvarint(buf, uint64(m.Size))
			end = m.Offset + m.Size
		}
		out = append(out, Record{Op: OpPackRun, Pack: pack, Members: base64.StdEncoding.EncodeToString(buf)})
	}
	return out
}

// byOffset returns the indexes of members in offset order, stably. They
// are sorted as integers, each offset and index in one: a stable sort of
// the members themselves took 60 ms for the 100,000 of an add of as many
// small tensors, this takes 5. Offsets or counts too large for that (never
// in a pack this build writes) take the stable sort.
func byOffset(members []PackMember) []int {
	const indexBits, offsetBits = 20, 64 - 20
	order := make([]int, len(members))
	keys := make([]uint64, len(members))
	fits := len(members) <= 1<<indexBits
	for i, m := range members {
		order[i] = i
		fits = fits && m.Offset >= 0 && m.Offset < 1<<offsetBits
		keys[i] = uint64(m.Offset)<<indexBits | uint64(i)
	}
	if !fits {
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(members[a].Offset, members[b].Offset) })
		return order
	}
	slices.Sort(keys)
	for j, k := range keys {
		order[j] = int(k & (1<<indexBits - 1))
	}
	return order
}

// expandPackRun returns the OpPacked records r, an OpPackRun record, stands
// for; ok is false when its members do not decode (a checksum that passed
// over bytes this build did not write).
func expandPackRun(r Record) ([]Record, bool) {
	var out []Record
	ok := eachPackMember(r, func(n int) { out = make([]Record, 0, n) }, func(m Record) { out = append(out, m) })
	return out, ok
}

// packRunDecodes reports whether r's members decode, as expandPackRun
// would, without making their records: fsck's check of the journal of a
// store of 700,000 packed blobs made 165 MB of them to drop each at once.
func packRunDecodes(r Record) bool {
	return eachPackMember(r, func(int) {}, func(Record) {})
}

// eachPackMember decodes r's members, calls start with (at most) how many
// there are, then member with each in turn, and reports whether they all
// decode.
func eachPackMember(r Record, start func(n int), member func(Record)) bool {
	b, err := base64.StdEncoding.DecodeString(r.Members)
	if err != nil || r.Pack == "" || r.Digest != (objects.Digest{}) || r.Offset != 0 || r.Size != 0 {
		return false
	}
	start(min(len(b)/34, packRunMax))
	var end int64
	for len(b) > 0 {
		if len(b) < len(objects.Digest{})+2 {
			return false
		}
		m := Record{Op: OpPacked, Batch: r.Batch, Pack: r.Pack, Digest: objects.Digest(b[:32])}
		b = b[32:]
		delta, n := binary.Varint(b)
		if n <= 0 {
			return false
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		// Bounded (far beyond any pack) so that no sum overflows.
		if n <= 0 || size > packRunBound || delta < -end || delta > packRunBound {
			return false
		}
		b = b[n:]
		m.Offset, m.Size = end+delta, int64(size)
		if m.Offset > packRunBound {
			return false
		}
		end = m.Offset + m.Size
		member(m)
	}
	return true
}
