package pytorch

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats/zipfile"
)

// Zip record signatures and sizes (APPNOTE.TXT 6.3) that the defect
// tests patch; the reader itself is formats/zipfile's.
const (
	sigLocal      = 0x04034b50
	sigCentral    = 0x02014b50
	localSize     = 30
	centralSize   = 46
	endSize       = 22
	end64Size     = 56
	locator64Size = 20
	flagEncrypted = 1 << 0
)

// validPickle is a state dict of one tensor over storage 0 (4 floats).
func validPickle() []byte {
	return newPickle().dict().str("w").rebuild("FloatStorage", "0", 4, 0, []int64{4}, []int64{1}).end()
}

func validMembers() []zipMember {
	return []zipMember{{"archive/data.pkl", validPickle()}, {"archive/byteorder", []byte("little")},
		{"archive/data/0", f32(4)}, {"archive/version", []byte("3\n")}}
}

// headerAt finds the record with signature sig naming name.
func headerAt(t *testing.T, b []byte, sig uint32, name string) int {
	t.Helper()
	nameAt := map[uint32]int{sigLocal: localSize, sigCentral: centralSize}[sig]
	var s [4]byte
	binary.LittleEndian.PutUint32(s[:], sig)
	for i := 0; i+nameAt+len(name) <= len(b); i++ {
		if bytes.Equal(b[i:i+4], s[:]) && string(b[i+nameAt:i+nameAt+len(name)]) == name {
			return i
		}
	}
	t.Fatalf("no record %#x for %s", sig, name)
	return -1
}

// insertBeforeCD inserts junk between the last member and the central
// directory, moving every pointer at it, so that only the gap is wrong.
func insertBeforeCD(b []byte, junk []byte) []byte {
	le := binary.LittleEndian
	cd := int(le.Uint32(b[len(b)-endSize+16:]))
	out := append(append(append([]byte{}, b[:cd]...), junk...), b[cd:]...)
	n := len(out)
	le.PutUint32(out[n-endSize+16:], uint32(cd+len(junk)))
	loc := n - endSize - locator64Size
	le.PutUint64(out[loc+8:], le.Uint64(out[loc+8:])+uint64(len(junk)))
	rec := loc - end64Size
	le.PutUint64(out[rec+48:], uint64(cd+len(junk)))
	return out
}

func TestZipDefects(t *testing.T) {
	valid := zipOf(validMembers()...)
	if _, err := parse(valid); err != nil {
		t.Fatalf("the valid archive is refused: %v", err)
	}
	patch := func(f func(b []byte)) []byte {
		b := bytes.Clone(valid)
		f(b)
		return b
	}
	le := binary.LittleEndian
	with := func(extra ...zipMember) []byte { return zipOf(append(validMembers(), extra...)...) }
	replace := func(name string, data []byte) []byte {
		ms := validMembers()
		for i := range ms {
			if ms[i].name == name {
				ms[i].data = data
			}
		}
		return zipOf(ms...)
	}
	without := func(name string) []byte {
		var ms []zipMember
		for _, m := range validMembers() {
			if m.name != name {
				ms = append(ms, m)
			}
		}
		return zipOf(ms...)
	}
	for _, tc := range []struct {
		name  string
		file  []byte
		class errs.Class
		names []string
	}{
		{"duplicate member", with(zipMember{"archive/data/0", f32(4)}), errs.SchemaError, []string{"twice"}},
		{"local name differs from central", patch(func(b []byte) {
			b[headerAt(t, b, sigLocal, "archive/data/0")+localSize+len("archive/data/")] = '1'
		}), errs.InvalidArchive, []string{"local header"}},
		{"local flags differ from central", patch(func(b []byte) {
			le.PutUint16(b[headerAt(t, b, sigLocal, "archive/version")+6:], 0)
		}), errs.InvalidArchive, []string{"flags"}},
		{"local method differs from central", patch(func(b []byte) {
			le.PutUint16(b[headerAt(t, b, sigLocal, "archive/version")+8:], 8)
		}), errs.InvalidArchive, []string{"method"}},
		{"local time differs from central", patch(func(b []byte) {
			le.PutUint16(b[headerAt(t, b, sigLocal, "archive/version")+10:], 1)
		}), errs.InvalidArchive, []string{"times"}},
		{"local CRC differs from central", patch(func(b []byte) {
			le.PutUint32(b[headerAt(t, b, sigLocal, "archive/version")+14:], 1)
		}), errs.InvalidArchive, []string{"CRC"}},
		{"descriptor CRC differs from central", patch(func(b []byte) {
			at := headerAt(t, b, sigCentral, "archive/version")
			b[at+16] ^= 1
		}), errs.InvalidArchive, []string{"descriptor"}},
		{"CRC mismatch in a storage", patch(func(b []byte) {
			at := headerAt(t, b, sigLocal, "archive/data/0")
			b[at+int(le.Uint16(b[at+26:]))+int(le.Uint16(b[at+28:]))+localSize] ^= 0x40
		}), errs.InvalidArchive, []string{"CRC-32 mismatch", "archive/data/0"}},
		{"CRC mismatch in data.pkl", patch(func(b []byte) {
			at := headerAt(t, b, sigLocal, "archive/data.pkl")
			b[at+int(le.Uint16(b[at+26:]))+int(le.Uint16(b[at+28:]))+localSize+5] ^= 0x40
		}), errs.InvalidArchive, []string{"CRC-32 mismatch"}},
		{"encrypted member", patch(func(b []byte) {
			for _, sig := range []uint32{sigLocal, sigCentral} {
				at := headerAt(t, b, sig, "archive/version") + map[uint32]int{sigLocal: 6, sigCentral: 8}[sig]
				le.PutUint16(b[at:], le.Uint16(b[at:])|flagEncrypted)
			}
		}), errs.UnsupportedVersion, []string{"encrypted"}},
		{"compressed member", patch(func(b []byte) {
			for _, sig := range []uint32{sigLocal, sigCentral} {
				at := headerAt(t, b, sig, "archive/version") + map[uint32]int{sigLocal: 8, sigCentral: 10}[sig]
				le.PutUint16(b[at:], zipfile.Deflate)
			}
		}), errs.UnsupportedVersion, []string{"compressed"}},
		{"parent directory in a name", with(zipMember{"archive/../x", []byte("x")}), errs.PathTraversal, []string{"archive/../x"}},
		{"absolute name", with(zipMember{"/etc/passwd", []byte("x")}), errs.PathTraversal, []string{"/etc/passwd"}},
		{"backslash in a name", with(zipMember{`archive\..\x`, []byte("x")}), errs.PathTraversal, nil},
		{"drive letter in a name", with(zipMember{"archive/C:x", []byte("x")}), errs.PathTraversal, nil},
		{"confusable slash in a name", with(zipMember{"archive/a\u2215..\u2215x", []byte("x")}), errs.PathTraversal, nil},
		{"member outside the folder", with(zipMember{"other/x", []byte("x")}), errs.SchemaError, []string{"outside"}},
		{"no folder", zipOf(zipMember{"data.pkl", validPickle()}), errs.SchemaError, []string{"folder"}},
		{"TorchScript code", with(zipMember{"archive/code/__torch__/m.py", []byte("def f(): pass")}), errs.UnsupportedVersion, []string{"TorchScript"}},
		{"TorchScript constants", with(zipMember{"archive/constants.pkl", []byte("x")}), errs.UnsupportedVersion, []string{"TorchScript"}},
		{"no data.pkl", without("archive/data.pkl"), errs.SchemaError, []string{"data.pkl"}},
		{"no version", without("archive/version"), errs.SchemaError, []string{"version"}},
		{"version from the future", replace("archive/version", []byte("11\n")), errs.UnsupportedVersion, []string{"11"}},
		{"version not a number", replace("archive/version", []byte("three")), errs.SchemaError, []string{"three"}},
		{"big-endian storages", replace("archive/byteorder", []byte("big")), errs.UnsupportedVersion, []string{"big-endian"}},
		{"unknown byte order", replace("archive/byteorder", []byte("middle")), errs.SchemaError, []string{"middle"}},
		{"format version 2", with(zipMember{"archive/.format_version", []byte("2")}), errs.UnsupportedVersion, []string{"version 2"}},
		{"bytes between members and the central directory", insertBeforeCD(valid, []byte("hidden")), errs.InvalidArchive, []string{"belong to no member"}},
		{"bytes after the end record", append(bytes.Clone(valid), 0), errs.InvalidArchive, []string{"end of central directory"}},
		{"bytes before the first member", append([]byte("MZ"), valid...), errs.InvalidArchive, nil},
		{"multi-volume", patch(func(b []byte) { le.PutUint32(b[len(b)-endSize-4:], 2) }), errs.UnsupportedVersion, []string{"multi-volume"}},
		{"end records disagree", patch(func(b []byte) { le.PutUint16(b[len(b)-endSize+10:], 2) }), errs.InvalidArchive, []string{"disagree"}},
		{"empty archive", zipOf(), errs.SchemaError, []string{"no members"}},
		{"too short", []byte("PK\x03\x04"), errs.InvalidArchive, nil},
		{"legacy pickle", newPickle().op(opNone).stop(), errs.UnsupportedVersion, []string{"legacy"}},
		{"preview format", []byte("PYTORCH1........"), errs.UnsupportedVersion, []string{"PYTORCH1"}},
		{"GGML", []byte("tjgg\x01\x00\x00\x00"), errs.UnsupportedVersion, []string{"GGML"}},
		{"something else", []byte("abc"), errs.InvalidArchive, []string{"not a PyTorch checkpoint"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.file)
			wantClass(t, err, tc.class, tc.names...)
		})
	}
}

// Zip64 fields, where torch (miniz) writes them past 4 GiB, are read: here
// forced on every member of a small archive.
func TestZip64(t *testing.T) {
	l, err := Plan(mixed, PlanOptions{File: "m.pt"})
	if err != nil {
		t.Fatal(err)
	}
	members := make([]int, len(mixed))
	for i := range members {
		members[i] = i
	}
	l.Files[0] = planFile("m.pt", mixed, members, true)
	files := materialize(t, l, mixed)
	back, err := parse(files["m.pt"])
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Tensors) != len(mixed) || back.Tensors[0].Name != mixed[0].Name {
		t.Fatalf("tensors %+v", back.Tensors)
	}
	if !bytes.Contains(files["m.pt"], []byte{0x01, 0x00, 24, 0}) {
		t.Fatal("no zip64 extra field was written")
	}
}

// Directory entries, which zip tools add, are allowed and hold nothing.
func TestDirectoryEntries(t *testing.T) {
	b := zipOf(append([]zipMember{{"archive/", nil}, {"archive/data/", nil}}, validMembers()...)...)
	l, err := parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Tensors) != 1 || l.Tensors[0].Name != "w" {
		t.Fatalf("tensors %+v", l.Tensors)
	}
}
