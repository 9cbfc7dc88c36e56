package pytorch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"strings"

	"github.com/mstore/mstore/formats"
	"github.com/mstore/mstore/internal/errs"
)

// Zip record signatures and sizes (APPNOTE.TXT 6.3).
const (
	sigLocal       = 0x04034b50
	sigCentral     = 0x02014b50
	sigEnd         = 0x06054b50
	sigEnd64       = 0x06064b50
	sigLocator64   = 0x07064b50
	sigDescriptor  = 0x08074b50
	localSize      = 30
	centralSize    = 46
	endSize        = 22
	end64Size      = 56
	locator64Size  = 20
	maxComment     = 0xffff
	zip64ExtraID   = 0x0001
	flagEncrypted  = 1 << 0
	flagDescriptor = 1 << 3
	flagStrongEnc  = 1 << 6
	flagMaskedCD   = 1 << 13
	methodStored   = 0
	methodDeflate  = 8
)

// member is one entry of a checkpoint's zip archive.
type member struct {
	name   string // as stored, e.g. "archive/data/0"
	record string // name without the archive folder, e.g. "data/0"
	flags  uint16
	method uint16
	crc    uint32
	size   int64 // compressed == uncompressed: only stored members are read
	header int64 // offset of the local header
	data   int64 // offset of the first data byte
	end    int64 // offset just past the member (its data descriptor included)
	zip64  bool  // the local header has a zip64 extra field
	dir    bool  // a directory entry ("name/", no data)
	time   uint16
	date   uint16
}

// archive is a checkpoint's zip structure: members in file order, and
// where the central directory starts.
type archive struct {
	path     string
	size     int64
	folder   string // the one top-level folder every member is in
	members  []*member
	byRecord map[string]*member
	cdStart  int64
}

// readArchive reads and checks the zip structure of a checkpoint: the end
// records, the central directory, every local header and data descriptor.
// Members must tile the file exactly up to the central directory, which
// must run to the end records, which must end the file. Data is not read
// here; checkCRCs does that.
func readArchive(r io.ReaderAt, size int64, path string, lim Limits) (*archive, error) {
	a := &archive{path: path, size: size, byRecord: map[string]*member{}}
	cd, err := a.readEnd(r, lim)
	if err != nil {
		return nil, err
	}
	if err := a.readCentral(r, cd, lim); err != nil {
		return nil, err
	}
	if err := a.checkFolder(); err != nil {
		return nil, err
	}
	if err := a.checkTorchScript(); err != nil {
		return nil, err
	}
	for _, m := range a.members {
		if err := a.readLocal(r, m); err != nil {
			return nil, err
		}
	}
	sort.Slice(a.members, func(i, j int) bool { return a.members[i].header < a.members[j].header })
	var at int64
	for _, m := range a.members {
		switch {
		case m.header > at:
			return nil, a.fail(errs.InvalidArchive, at, "bytes %d to %d belong to no member", at, m.header)
		case m.header < at:
			return nil, a.fail(errs.InvalidArchive, m.header, "member %s overlaps the member before it", m.name)
		}
		at = m.end
	}
	if at != a.cdStart {
		return nil, a.fail(errs.InvalidArchive, at, "bytes %d to %d, before the central directory, belong to no member", at, a.cdStart)
	}
	return a, nil
}

func (a *archive) fail(class errs.Class, at int64, format string, args ...any) error {
	return errs.At(class, pkg, a.path, at, format, args...)
}

// centralDir says where the central directory is and how many entries it
// holds, from the end records.
type centralDir struct {
	offset, size, entries int64
}

// readEnd finds the end of central directory record (its comment must end
// the file) and, when present, the zip64 end record and its locator.
func (a *archive) readEnd(r io.ReaderAt, lim Limits) (centralDir, error) {
	if a.size < endSize {
		return centralDir{}, a.fail(errs.InvalidArchive, 0, "file of %d bytes is too short for a zip archive", a.size)
	}
	tailLen := min(a.size, endSize+maxComment)
	tail := make([]byte, tailLen)
	if err := readAt(r, tail, a.size-tailLen, a.path); err != nil {
		return centralDir{}, err
	}
	eocd := int64(-1)
	for i := len(tail) - endSize; i >= 0; i-- {
		if binary.LittleEndian.Uint32(tail[i:]) == sigEnd && int(binary.LittleEndian.Uint16(tail[i+20:])) == len(tail)-i-endSize {
			eocd = a.size - tailLen + int64(i)
			tail = tail[i:]
			break
		}
	}
	if eocd < 0 {
		return centralDir{}, a.fail(errs.InvalidArchive, a.size, "no end of central directory record ends the file (truncated, or not a zip archive)")
	}
	le := binary.LittleEndian
	disk, cdDisk := le.Uint16(tail[4:]), le.Uint16(tail[6:])
	onDisk, entries := le.Uint16(tail[8:]), le.Uint16(tail[10:])
	cdSize, cdOffset := le.Uint32(tail[12:]), le.Uint32(tail[16:])
	cd := centralDir{offset: int64(cdOffset), size: int64(cdSize), entries: int64(entries)}
	cdEnd := eocd

	var loc [locator64Size]byte
	if eocd >= locator64Size {
		if err := readAt(r, loc[:], eocd-locator64Size, a.path); err != nil {
			return centralDir{}, err
		}
	}
	if eocd >= locator64Size && le.Uint32(loc[:]) == sigLocator64 {
		locAt := eocd - locator64Size
		if le.Uint32(loc[4:]) != 0 || le.Uint32(loc[16:]) != 1 {
			return centralDir{}, a.fail(errs.UnsupportedVersion, locAt, "multi-volume zip archives are not supported")
		}
		recAt := le.Uint64(loc[8:])
		if recAt > uint64(locAt) || uint64(locAt)-recAt < end64Size {
			return centralDir{}, a.fail(errs.InvalidArchive, locAt, "zip64 end record offset %d is out of place", recAt)
		}
		var rec [end64Size]byte
		if err := readAt(r, rec[:], int64(recAt), a.path); err != nil {
			return centralDir{}, err
		}
		if le.Uint32(rec[:]) != sigEnd64 || le.Uint64(rec[4:])+12 != uint64(locAt)-recAt {
			return centralDir{}, a.fail(errs.InvalidArchive, int64(recAt), "no zip64 end of central directory record where its locator points")
		}
		if le.Uint32(rec[16:]) != 0 || le.Uint32(rec[20:]) != 0 || le.Uint64(rec[24:]) != le.Uint64(rec[32:]) {
			return centralDir{}, a.fail(errs.UnsupportedVersion, int64(recAt), "multi-volume zip archives are not supported")
		}
		z := centralDir{offset: int64(min(le.Uint64(rec[48:]), 1<<63-1)), size: int64(min(le.Uint64(rec[40:]), 1<<63-1)),
			entries: int64(min(le.Uint64(rec[32:]), 1<<63-1))}
		if entries != 0xffff && int64(entries) != z.entries || cdSize != 0xffffffff && int64(cdSize) != z.size ||
			cdOffset != 0xffffffff && int64(cdOffset) != z.offset {
			return centralDir{}, a.fail(errs.InvalidArchive, eocd, "the end record and the zip64 end record disagree")
		}
		cd, cdEnd = z, int64(recAt)
	} else if disk != 0 || cdDisk != 0 || onDisk != entries {
		return centralDir{}, a.fail(errs.UnsupportedVersion, eocd, "multi-volume zip archives are not supported")
	}
	if cd.entries > lim.MaxMembers {
		return centralDir{}, a.fail(errs.SizeLimitExceeded, eocd, "%d members, more than the limit of %d", cd.entries, lim.MaxMembers)
	}
	if cd.size > lim.MaxCentralDirectory {
		return centralDir{}, a.fail(errs.SizeLimitExceeded, eocd, "central directory of %d bytes is over the %d-byte limit", cd.size, lim.MaxCentralDirectory)
	}
	if cd.offset > cdEnd || cd.size != cdEnd-cd.offset {
		return centralDir{}, a.fail(errs.InvalidArchive, eocd, "central directory of %d bytes at %d does not end where the end records begin (%d)", cd.size, cd.offset, cdEnd)
	}
	if cd.entries*centralSize > cd.size {
		return centralDir{}, a.fail(errs.InvalidArchive, eocd, "%d entries cannot fit in a central directory of %d bytes", cd.entries, cd.size)
	}
	a.cdStart = cd.offset
	return cd, nil
}

// readCentral parses the central directory: every entry's name is checked
// against the path rules, and repeated names, encryption and split
// archives are refused.
func (a *archive) readCentral(r io.ReaderAt, cd centralDir, lim Limits) error {
	buf := make([]byte, cd.size) // bounded by MaxCentralDirectory above
	if err := readAt(r, buf, cd.offset, a.path); err != nil {
		return err
	}
	le := binary.LittleEndian
	seen := map[string]bool{}
	p := 0
	for i := int64(0); i < cd.entries; i++ {
		at := cd.offset + int64(p)
		if len(buf)-p < centralSize || le.Uint32(buf[p:]) != sigCentral {
			return a.fail(errs.InvalidArchive, at, "central directory entry %d is missing or damaged", i)
		}
		h := buf[p : p+centralSize]
		nameLen, extraLen, commentLen := int(le.Uint16(h[28:])), int(le.Uint16(h[30:])), int(le.Uint16(h[32:]))
		if len(buf)-p-centralSize < nameLen+extraLen+commentLen {
			return a.fail(errs.InvalidArchive, at, "central directory entry %d passes the end of the directory", i)
		}
		name := string(buf[p+centralSize : p+centralSize+nameLen])
		extra := buf[p+centralSize+nameLen : p+centralSize+nameLen+extraLen]
		p += centralSize + nameLen + extraLen + commentLen
		m := &member{name: name, flags: le.Uint16(h[8:]), method: le.Uint16(h[10:]), time: le.Uint16(h[12:]),
			date: le.Uint16(h[14:]), crc: le.Uint32(h[16:])}
		csize, usize, offset := uint64(le.Uint32(h[20:])), uint64(le.Uint32(h[24:])), uint64(le.Uint32(h[42:]))
		disk := uint32(le.Uint16(h[34:]))
		fields, err := extraFields(extra)
		if err != nil {
			return a.fail(errs.InvalidArchive, at, "member %q: %v", name, err)
		}
		if z, ok := fields[zip64ExtraID]; ok {
			for _, v := range []*uint64{&usize, &csize, &offset} {
				if *v != 0xffffffff {
					continue
				}
				if len(z) < 8 {
					return a.fail(errs.InvalidArchive, at, "member %q: zip64 extra field too short", name)
				}
				*v, z = le.Uint64(z), z[8:]
			}
			if disk == 0xffff && len(z) >= 4 {
				disk = le.Uint32(z)
			}
		}
		switch {
		case disk != 0:
			return a.fail(errs.UnsupportedVersion, at, "member %q is on another volume: multi-volume archives are not supported", name)
		case m.flags&(flagEncrypted|flagStrongEnc|flagMaskedCD) != 0:
			return a.fail(errs.UnsupportedVersion, at, "member %q is encrypted: encrypted checkpoints are not supported", name)
		case usize > 1<<62 || csize > 1<<62 || offset > 1<<62:
			return a.fail(errs.InvalidArchive, at, "member %q: size or offset out of range", name)
		}
		m.size, m.header = int64(usize), int64(offset)
		if m.method == methodStored && csize != usize {
			return a.fail(errs.InvalidArchive, at, "member %q is stored but its compressed size %d differs from its size %d", name, csize, usize)
		}
		if m.method != methodStored {
			m.size = int64(csize) // what lies in the file; such members are refused after the TorchScript check
		}
		clean := name
		if strings.HasSuffix(name, "/") && usize == 0 {
			m.dir, clean = true, strings.TrimSuffix(name, "/")
		}
		if !formats.IsMemberPath(clean) {
			return a.fail(errs.PathTraversal, at, "member name %q is not a clean relative path inside the archive", name)
		}
		if seen[name] {
			return a.fail(errs.SchemaError, at, "member %q appears twice in the archive", name)
		}
		seen[name] = true
		a.members = append(a.members, m)
	}
	if p != len(buf) {
		return a.fail(errs.InvalidArchive, cd.offset+int64(p), "%d bytes after the last central directory entry", len(buf)-p)
	}
	if len(a.members) == 0 {
		return a.fail(errs.SchemaError, cd.offset, "the archive holds no members (a torch.save checkpoint holds data.pkl)")
	}
	return nil
}

// checkFolder checks that every member is inside one top-level folder, the
// one torch.save names after the file ("archive/…", "model/…").
func (a *archive) checkFolder() error {
	first := a.members[0].name
	folder, _, ok := strings.Cut(first, "/")
	if !ok || folder == "" {
		return a.fail(errs.SchemaError, -1, "member %q is not inside a folder: a torch.save archive keeps everything in one top-level folder", first)
	}
	a.folder = folder
	for _, m := range a.members {
		rest, ok := strings.CutPrefix(m.name, folder+"/")
		if !ok {
			if m.dir && m.name == folder+"/" {
				continue
			}
			return a.fail(errs.SchemaError, -1, "member %q is outside the archive's folder %q", m.name, folder)
		}
		m.record = rest
		if !m.dir {
			a.byRecord[rest] = m
		}
	}
	return nil
}

// checkTorchScript refuses torch.jit.save archives, whose code/ folder holds
// Python source that torch.jit.load compiles and runs, and compressed
// members, which torch.save never writes.
func (a *archive) checkTorchScript() error {
	for _, m := range a.members {
		if strings.HasPrefix(m.record, "code/") || m.record == "constants.pkl" || m.record == "bytecode.pkl" {
			return a.fail(errs.UnsupportedVersion, -1,
				"this is a TorchScript archive (torch.jit.save): its %s holds code that runs when it is loaded, so mstore does not take it; save the model's state_dict() with torch.save instead", m.name)
		}
	}
	for _, m := range a.members {
		if m.method != methodStored {
			return a.fail(errs.UnsupportedVersion, -1, "member %q is compressed (method %d): torch.save stores members uncompressed, and mstore reads only stored members", m.name, m.method)
		}
	}
	return nil
}

// readLocal reads a member's local header and data descriptor and checks
// them against its central directory entry.
func (a *archive) readLocal(r io.ReaderAt, m *member) error {
	le := binary.LittleEndian
	if m.header > a.cdStart-localSize {
		return a.fail(errs.InvalidArchive, m.header, "member %q: local header offset %d is past the central directory", m.name, m.header)
	}
	var h [localSize]byte
	if err := readAt(r, h[:], m.header, a.path); err != nil {
		return err
	}
	if le.Uint32(h[:]) != sigLocal {
		return a.fail(errs.InvalidArchive, m.header, "member %q: no local header where the central directory points", m.name)
	}
	nameLen, extraLen := int64(le.Uint16(h[26:])), int64(le.Uint16(h[28:]))
	if nameLen != int64(len(m.name)) || m.header+localSize+nameLen+extraLen > a.cdStart {
		return a.fail(errs.InvalidArchive, m.header, "member %q: local header disagrees with the central directory about the name", m.name)
	}
	ne := make([]byte, nameLen+extraLen) // both bounded by 16 bits
	if err := readAt(r, ne, m.header+localSize, a.path); err != nil {
		return err
	}
	if string(ne[:nameLen]) != m.name {
		return a.fail(errs.InvalidArchive, m.header, "member %q: local header names %q", m.name, ne[:nameLen])
	}
	fields, err := extraFields(ne[nameLen:])
	if err != nil {
		return a.fail(errs.InvalidArchive, m.header, "member %q: local %v", m.name, err)
	}
	z64, hasZ64 := fields[zip64ExtraID]
	m.zip64 = hasZ64
	flags, method := le.Uint16(h[6:]), le.Uint16(h[8:])
	crc, csize, usize := le.Uint32(h[14:]), uint64(le.Uint32(h[18:])), uint64(le.Uint32(h[22:]))
	switch {
	case flags != m.flags:
		return a.fail(errs.InvalidArchive, m.header, "member %q: local flags %#x, central directory %#x", m.name, flags, m.flags)
	case method != m.method:
		return a.fail(errs.InvalidArchive, m.header, "member %q: local method %d, central directory %d", m.name, method, m.method)
	case le.Uint16(h[10:]) != m.time || le.Uint16(h[12:]) != m.date:
		return a.fail(errs.InvalidArchive, m.header, "member %q: local and central modification times differ", m.name)
	}
	m.data = m.header + localSize + nameLen + extraLen
	if m.size > a.cdStart-m.data {
		return a.fail(errs.InvalidArchive, m.data, "member %q: %d bytes of data pass the central directory", m.name, m.size)
	}
	m.end = m.data + m.size
	if flags&flagDescriptor == 0 {
		if usize == 0xffffffff && csize == 0xffffffff && len(z64) >= 16 {
			usize, csize = le.Uint64(z64), le.Uint64(z64[8:])
		}
		if crc != m.crc || csize != uint64(m.size) || usize != uint64(m.size) {
			return a.fail(errs.InvalidArchive, m.header, "member %q: local header and central directory disagree about its size or CRC", m.name)
		}
		return nil
	}
	// With a data descriptor the local fields are zero (or, from some
	// writers, already the right values).
	if (crc != 0 || csize != 0 || usize != 0) && (crc != m.crc || csize != uint64(m.size) || usize != uint64(m.size)) {
		return a.fail(errs.InvalidArchive, m.header, "member %q: local header and central directory disagree about its size or CRC", m.name)
	}
	return a.readDescriptor(r, m)
}

// readDescriptor reads the data descriptor after a member's data: an
// optional signature, the CRC, then both sizes, 8 bytes each when the local
// header carries a zip64 field (as miniz, torch's zip library, writes them).
func (a *archive) readDescriptor(r io.ReaderAt, m *member) error {
	le := binary.LittleEndian
	width := int64(4)
	if m.zip64 {
		width = 8
	}
	n := min(4+4+2*width, a.cdStart-m.end)
	var d [24]byte
	if err := readAt(r, d[:n], m.end, a.path); err != nil {
		return err
	}
	b := d[:n]
	if len(b) >= 4 && le.Uint32(b) == sigDescriptor {
		b = b[4:]
	}
	if int64(len(b)) < 4+2*width {
		return a.fail(errs.InvalidArchive, m.end, "member %q: data descriptor cut short by the central directory", m.name)
	}
	crc := le.Uint32(b)
	var csize, usize uint64
	if width == 8 {
		csize, usize = le.Uint64(b[4:]), le.Uint64(b[12:])
	} else {
		csize, usize = uint64(le.Uint32(b[4:])), uint64(le.Uint32(b[8:]))
	}
	if crc != m.crc || csize != uint64(m.size) || usize != uint64(m.size) {
		return a.fail(errs.InvalidArchive, m.end, "member %q: data descriptor and central directory disagree about its size or CRC", m.name)
	}
	m.end += int64(len(d[:n])-len(b)) + 4 + 2*width
	return nil
}

// extraFields splits an extra field into its (id, data) records, which
// must fill it exactly.
func extraFields(b []byte) (map[uint16][]byte, error) {
	out := map[uint16][]byte{}
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, errors.New("extra field ends inside a record header")
		}
		id, n := binary.LittleEndian.Uint16(b), int(binary.LittleEndian.Uint16(b[2:]))
		if len(b)-4 < n {
			return nil, fmt.Errorf("extra field record %#04x passes the end of the field", id)
		}
		if _, dup := out[id]; dup {
			return nil, fmt.Errorf("extra field record %#04x appears twice", id)
		}
		out[id] = b[4 : 4+n]
		b = b[4+n:]
	}
	return out, nil
}

// read returns a member's data whole; callers bound its size first.
func (a *archive) read(r io.ReaderAt, m *member) ([]byte, error) {
	b := make([]byte, m.size)
	if err := readAt(r, b, m.data, a.path); err != nil {
		return nil, err
	}
	if crc32.ChecksumIEEE(b) != m.crc {
		return nil, a.fail(errs.InvalidArchive, m.data, "member %q: CRC-32 mismatch (the data is corrupt)", m.name)
	}
	return b, nil
}

// checkCRC streams a member's data through CRC-32 and compares it with the
// central directory's.
func (a *archive) checkCRC(r io.ReaderAt, m *member, buf []byte) error {
	h := crc32.NewIEEE()
	for off := int64(0); off < m.size; {
		n := min(int64(len(buf)), m.size-off)
		if err := readAt(r, buf[:n], m.data+off, a.path); err != nil {
			return err
		}
		h.Write(buf[:n])
		off += n
	}
	if h.Sum32() != m.crc {
		return a.fail(errs.InvalidArchive, m.data, "member %q: CRC-32 mismatch (the data is corrupt)", m.name)
	}
	return nil
}

// readAt fills b from r at off; a short read is a truncated file.
func readAt(r io.ReaderAt, b []byte, off int64, path string) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errs.At(errs.InvalidArchive, pkg, path, off+int64(n), "file ends after %d of %d bytes read here", n, len(b))
	}
	return fmt.Errorf("pytorch: read %s at %d: %w", path, off, err)
}

// sniff classifies a file that is not a zip archive by its first bytes, so
// that legacy checkpoints get a clear reason.
func sniff(head []byte, path string) error {
	legacyMagic := []byte{0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19}
	switch {
	case bytes.HasPrefix(head, legacyMagic) || len(head) > 0 && head[0] == 0x80:
		return errs.At(errs.UnsupportedVersion, pkg, path, 0,
			"this is a legacy (pre-1.6, not zip) PyTorch checkpoint: a bare pickle stream that mstore does not read; load it in a trusted environment and save it again with torch.save (zip format), or convert it to SafeTensors")
	case bytes.HasPrefix(head, []byte("PYTORCH1")):
		return errs.At(errs.UnsupportedVersion, pkg, path, 0, "this is a checkpoint from PyTorch's preview release format (PYTORCH1), which mstore does not read")
	case len(head) >= 262 && string(head[257:262]) == "ustar":
		return errs.At(errs.UnsupportedVersion, pkg, path, 0, "this is a legacy tar-format PyTorch checkpoint (PyTorch 0.x), which mstore does not read")
	case bytes.HasPrefix(head, []byte("lmgg")) || bytes.HasPrefix(head, []byte("fmgg")) || bytes.HasPrefix(head, []byte("tjgg")):
		return errs.At(errs.UnsupportedVersion, pkg, path, 0, "this is a GGML model (the format before GGUF), not a PyTorch checkpoint; mstore does not read it")
	}
	return errs.At(errs.InvalidArchive, pkg, path, 0, "not a PyTorch checkpoint: torch.save writes a zip archive, and this file does not start with one")
}
