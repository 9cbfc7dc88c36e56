// Package zipfile reads the structure of a zip archive for the codecs
// whose containers are zip files (PyTorch's torch.save, NumPy's .npz): the
// end records (zip64 included), the central directory, every local header
// and data descriptor, and checks that the members tile the file exactly,
// so that a layout of the file's bytes has no gap a reader would skip.
// Names are checked against the path rules; encryption and multi-volume
// archives are refused. Data is read on demand, CRC-checked.
package zipfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
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

// LocalHeaderSize is the fixed part of a local header: its name and extra
// field follow, then the member's data.
const LocalHeaderSize = localSize

// Limits bound what reading the directory allocates.
type Limits struct {
	MaxMembers          int64 // central directory entries
	MaxCentralDirectory int64 // bytes of the central directory, read whole
}

// Methods a member may be stored with.
const (
	Stored  = methodStored
	Deflate = methodDeflate
)

// Member is one entry of a zip archive.
type Member struct {
	Name   string // as stored, e.g. "archive/data/0"
	Flags  uint16
	Method uint16
	CRC    uint32
	Size   int64 // bytes of data in the file (compressed)
	USize  int64 // bytes once decompressed (Size for a stored member)
	Header int64 // offset of the local header
	Data   int64 // offset of the first data byte (once ReadLocals ran)
	End    int64 // offset just past the member, its data descriptor included
	Zip64  bool  // the local header has a zip64 extra field
	Dir    bool  // a directory entry ("name/", no data)
	Time   uint16
	Date   uint16
}

// Archive is a zip file's structure: its members (in central directory
// order, then, after ReadLocals, in file order) and where the central
// directory starts. Pkg names the codec in errors.
type Archive struct {
	Path    string
	Size    int64
	Pkg     string
	Members []*Member
	CDStart int64
}

// ReadDirectory reads and checks the end records and the central
// directory of the zip file r of size bytes at path. A codec checks what
// its format requires of the members, then calls ReadLocals.
func ReadDirectory(r io.ReaderAt, size int64, path, pkg string, lim Limits) (*Archive, error) {
	a := &Archive{Path: path, Size: size, Pkg: pkg}
	cd, err := a.readEnd(r, lim)
	if err != nil {
		return nil, err
	}
	if err := a.readCentral(r, cd, lim); err != nil {
		return nil, err
	}
	return a, nil
}

// ReadLocals reads every local header and data descriptor, checks them
// against the central directory and sorts the members into file order:
// they must tile the file exactly up to the central directory, which must
// run to the end records, which must end the file. Data is not read.
func (a *Archive) ReadLocals(r io.ReaderAt) error {
	for _, m := range a.Members {
		if err := a.readLocal(r, m); err != nil {
			return err
		}
	}
	sort.Slice(a.Members, func(i, j int) bool { return a.Members[i].Header < a.Members[j].Header })
	var at int64
	for _, m := range a.Members {
		switch {
		case m.Header > at:
			return a.fail(errs.InvalidArchive, at, "bytes %d to %d belong to no member", at, m.Header)
		case m.Header < at:
			return a.fail(errs.InvalidArchive, m.Header, "member %s overlaps the member before it", m.Name)
		}
		at = m.End
	}
	if at != a.CDStart {
		return a.fail(errs.InvalidArchive, at, "bytes %d to %d, before the central directory, belong to no member", at, a.CDStart)
	}
	return nil
}

func (a *Archive) fail(class errs.Class, at int64, format string, args ...any) error {
	return errs.At(class, a.Pkg, a.Path, at, format, args...)
}

// centralDir says where the central directory is and how many entries it
// holds, from the end records.
type centralDir struct {
	offset, size, entries int64
}

// readEnd finds the end of central directory record (its comment must end
// the file) and, when present, the zip64 end record and its locator.
func (a *Archive) readEnd(r io.ReaderAt, lim Limits) (centralDir, error) {
	if a.Size < endSize {
		return centralDir{}, a.fail(errs.InvalidArchive, 0, "file of %d bytes is too short for a zip archive", a.Size)
	}
	// The record is the last one whose comment reaches the end of the file.
	// Without a comment (torch.save and numpy write none) it is in the
	// last bytes: only when it is not is the longest tail read, so that a
	// parse does not read 64 KiB of the data before the directory.
	var tail []byte
	eocd := int64(-1)
	for _, want := range []int64{endSize + 64, endSize + maxComment} {
		tailLen := min(a.Size, want)
		if tail != nil && tailLen <= int64(len(tail)) {
			break // the file is no longer than the tail searched
		}
		tail = make([]byte, tailLen)
		if err := ReadAt(r, tail, a.Size-tailLen, a.Pkg, a.Path); err != nil {
			return centralDir{}, err
		}
		for i := len(tail) - endSize; i >= 0; i-- {
			if binary.LittleEndian.Uint32(tail[i:]) == sigEnd && int(binary.LittleEndian.Uint16(tail[i+20:])) == len(tail)-i-endSize {
				eocd = a.Size - tailLen + int64(i)
				tail = tail[i:]
				break
			}
		}
		if eocd >= 0 {
			break
		}
	}
	if eocd < 0 {
		return centralDir{}, a.fail(errs.InvalidArchive, a.Size, "no end of central directory record ends the file (truncated, or not a zip archive)")
	}
	le := binary.LittleEndian
	disk, cdDisk := le.Uint16(tail[4:]), le.Uint16(tail[6:])
	onDisk, entries := le.Uint16(tail[8:]), le.Uint16(tail[10:])
	cdSize, cdOffset := le.Uint32(tail[12:]), le.Uint32(tail[16:])
	cd := centralDir{offset: int64(cdOffset), size: int64(cdSize), entries: int64(entries)}
	cdEnd := eocd

	var loc [locator64Size]byte
	if eocd >= locator64Size {
		if err := ReadAt(r, loc[:], eocd-locator64Size, a.Pkg, a.Path); err != nil {
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
		if err := ReadAt(r, rec[:], int64(recAt), a.Pkg, a.Path); err != nil {
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
	a.CDStart = cd.offset
	return cd, nil
}

// readCentral parses the central directory: every entry's name is checked
// against the path rules, and repeated names, encryption and split
// archives are refused.
func (a *Archive) readCentral(r io.ReaderAt, cd centralDir, lim Limits) error {
	buf := make([]byte, cd.size) // bounded by MaxCentralDirectory above
	if err := ReadAt(r, buf, cd.offset, a.Pkg, a.Path); err != nil {
		return err
	}
	le := binary.LittleEndian
	// Sized once: grown from empty, the names of 100,000 members were
	// hashed again at each growth. (entries is within MaxMembers, and 46
	// bytes of the directory an entry.)
	seen := make(map[string]bool, cd.entries)
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
		m := &Member{Name: name, Flags: le.Uint16(h[8:]), Method: le.Uint16(h[10:]), Time: le.Uint16(h[12:]),
			Date: le.Uint16(h[14:]), CRC: le.Uint32(h[16:])}
		csize, usize, offset := uint64(le.Uint32(h[20:])), uint64(le.Uint32(h[24:])), uint64(le.Uint32(h[42:]))
		disk := uint32(le.Uint16(h[34:]))
		z, ok, err := zip64Field(extra)
		if err != nil {
			return a.fail(errs.InvalidArchive, at, "member %q: %v", name, err)
		}
		if ok {
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
		case m.Flags&(flagEncrypted|flagStrongEnc|flagMaskedCD) != 0:
			return a.fail(errs.UnsupportedVersion, at, "member %q is encrypted: encrypted archives are not supported", name)
		case usize > 1<<62 || csize > 1<<62 || offset > 1<<62:
			return a.fail(errs.InvalidArchive, at, "member %q: size or offset out of range", name)
		}
		m.Size, m.USize, m.Header = int64(csize), int64(usize), int64(offset)
		if m.Method == methodStored && csize != usize {
			return a.fail(errs.InvalidArchive, at, "member %q is stored but its compressed size %d differs from its size %d", name, csize, usize)
		}
		clean := name
		if strings.HasSuffix(name, "/") && usize == 0 {
			m.Dir, clean = true, strings.TrimSuffix(name, "/")
		}
		if !formats.IsMemberPath(clean) {
			return a.fail(errs.PathTraversal, at, "member name %q is not a clean relative path inside the archive", name)
		}
		if seen[name] {
			return a.fail(errs.SchemaError, at, "member %q appears twice in the archive", name)
		}
		seen[name] = true
		a.Members = append(a.Members, m)
	}
	if p != len(buf) {
		return a.fail(errs.InvalidArchive, cd.offset+int64(p), "%d bytes after the last central directory entry", len(buf)-p)
	}
	if len(a.Members) == 0 {
		return a.fail(errs.SchemaError, cd.offset, "the archive holds no members")
	}
	return nil
}

// readLocal reads a member's local header and data descriptor and checks
// them against its central directory entry.
func (a *Archive) readLocal(r io.ReaderAt, m *Member) error {
	le := binary.LittleEndian
	if m.Header > a.CDStart-localSize {
		return a.fail(errs.InvalidArchive, m.Header, "member %q: local header offset %d is past the central directory", m.Name, m.Header)
	}
	var h [localSize]byte
	if err := ReadAt(r, h[:], m.Header, a.Pkg, a.Path); err != nil {
		return err
	}
	if le.Uint32(h[:]) != sigLocal {
		return a.fail(errs.InvalidArchive, m.Header, "member %q: no local header where the central directory points", m.Name)
	}
	nameLen, extraLen := int64(le.Uint16(h[26:])), int64(le.Uint16(h[28:]))
	if nameLen != int64(len(m.Name)) || m.Header+localSize+nameLen+extraLen > a.CDStart {
		return a.fail(errs.InvalidArchive, m.Header, "member %q: local header disagrees with the central directory about the name", m.Name)
	}
	ne := make([]byte, nameLen+extraLen) // both bounded by 16 bits
	if err := ReadAt(r, ne, m.Header+localSize, a.Pkg, a.Path); err != nil {
		return err
	}
	if string(ne[:nameLen]) != m.Name {
		return a.fail(errs.InvalidArchive, m.Header, "member %q: local header names %q", m.Name, ne[:nameLen])
	}
	z64, hasZ64, err := zip64Field(ne[nameLen:])
	if err != nil {
		return a.fail(errs.InvalidArchive, m.Header, "member %q: local %v", m.Name, err)
	}
	m.Zip64 = hasZ64
	flags, method := le.Uint16(h[6:]), le.Uint16(h[8:])
	crc, csize, usize := le.Uint32(h[14:]), uint64(le.Uint32(h[18:])), uint64(le.Uint32(h[22:]))
	switch {
	case flags != m.Flags:
		return a.fail(errs.InvalidArchive, m.Header, "member %q: local flags %#x, central directory %#x", m.Name, flags, m.Flags)
	case method != m.Method:
		return a.fail(errs.InvalidArchive, m.Header, "member %q: local method %d, central directory %d", m.Name, method, m.Method)
	case le.Uint16(h[10:]) != m.Time || le.Uint16(h[12:]) != m.Date:
		return a.fail(errs.InvalidArchive, m.Header, "member %q: local and central modification times differ", m.Name)
	}
	m.Data = m.Header + localSize + nameLen + extraLen
	if m.Size > a.CDStart-m.Data {
		return a.fail(errs.InvalidArchive, m.Data, "member %q: %d bytes of data pass the central directory", m.Name, m.Size)
	}
	m.End = m.Data + m.Size
	if flags&flagDescriptor == 0 {
		if usize == 0xffffffff && csize == 0xffffffff && len(z64) >= 16 {
			usize, csize = le.Uint64(z64), le.Uint64(z64[8:])
		}
		if crc != m.CRC || csize != uint64(m.Size) || usize != uint64(m.USize) {
			return a.fail(errs.InvalidArchive, m.Header, "member %q: local header and central directory disagree about its size or CRC", m.Name)
		}
		return nil
	}
	// With a data descriptor the local fields are zero (or, from some
	// writers, already the right values).
	if (crc != 0 || csize != 0 || usize != 0) && (crc != m.CRC || csize != uint64(m.Size) || usize != uint64(m.USize)) {
		return a.fail(errs.InvalidArchive, m.Header, "member %q: local header and central directory disagree about its size or CRC", m.Name)
	}
	return a.readDescriptor(r, m)
}

// readDescriptor reads the data descriptor after a member's data: an
// optional signature, the CRC, then both sizes, 8 bytes each when the local
// header carries a zip64 field (as miniz, torch's zip library, writes them).
func (a *Archive) readDescriptor(r io.ReaderAt, m *Member) error {
	le := binary.LittleEndian
	width := int64(4)
	if m.Zip64 {
		width = 8
	}
	n := min(4+4+2*width, a.CDStart-m.End)
	var d [24]byte
	if err := ReadAt(r, d[:n], m.End, a.Pkg, a.Path); err != nil {
		return err
	}
	b := d[:n]
	if len(b) >= 4 && le.Uint32(b) == sigDescriptor {
		b = b[4:]
	}
	if int64(len(b)) < 4+2*width {
		return a.fail(errs.InvalidArchive, m.End, "member %q: data descriptor cut short by the central directory", m.Name)
	}
	crc := le.Uint32(b)
	var csize, usize uint64
	if width == 8 {
		csize, usize = le.Uint64(b[4:]), le.Uint64(b[12:])
	} else {
		csize, usize = uint64(le.Uint32(b[4:])), uint64(le.Uint32(b[8:]))
	}
	if crc != m.CRC || csize != uint64(m.Size) || usize != uint64(m.USize) {
		return a.fail(errs.InvalidArchive, m.End, "member %q: data descriptor and central directory disagree about its size or CRC", m.Name)
	}
	m.End += int64(len(d[:n])-len(b)) + 4 + 2*width
	return nil
}

// zip64Field checks that an extra field is made of (id, data) records
// that fill it exactly, none twice, and returns the zip64 record's data.
// No map a field: a checkpoint's 100,000 members read 200,000 of them.
func zip64Field(b []byte) (z64 []byte, ok bool, err error) {
	var few [8]uint16 // a field's ids; past eight (never from a real writer), a map
	var many map[uint16]bool
	n := 0
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, false, errors.New("extra field ends inside a record header")
		}
		id, size := binary.LittleEndian.Uint16(b), int(binary.LittleEndian.Uint16(b[2:]))
		if len(b)-4 < size {
			return nil, false, fmt.Errorf("extra field record %#04x passes the end of the field", id)
		}
		if seenID(few[:min(n, len(few))], many, id) {
			return nil, false, fmt.Errorf("extra field record %#04x appears twice", id)
		}
		if n < len(few) {
			few[n] = id
		} else {
			if many == nil {
				many = map[uint16]bool{}
			}
			many[id] = true
		}
		n++
		if id == zip64ExtraID {
			z64, ok = b[4:4+size], true
		}
		b = b[4+size:]
	}
	return z64, ok, nil
}

func seenID(few []uint16, many map[uint16]bool, id uint16) bool {
	return slices.Contains(few, id) || many[id]
}

// read returns a member's data whole; callers bound its size first.
func (a *Archive) Read(r io.ReaderAt, m *Member) ([]byte, error) {
	b := make([]byte, m.Size)
	if err := ReadAt(r, b, m.Data, a.Pkg, a.Path); err != nil {
		return nil, err
	}
	if crc32.ChecksumIEEE(b) != m.CRC {
		return nil, a.fail(errs.InvalidArchive, m.Data, "member %q: CRC-32 mismatch (the data is corrupt)", m.Name)
	}
	return b, nil
}

// checkCRC streams a member's data through CRC-32 and compares it with the
// central directory's.
func (a *Archive) CheckCRC(r io.ReaderAt, m *Member, buf []byte) error {
	h := crc32.NewIEEE()
	for off := int64(0); off < m.Size; {
		n := min(int64(len(buf)), m.Size-off)
		if err := ReadAt(r, buf[:n], m.Data+off, a.Pkg, a.Path); err != nil {
			return err
		}
		h.Write(buf[:n])
		off += n
	}
	if h.Sum32() != m.CRC {
		return m.CRC32Check().Mismatch(a.Pkg, a.Path)
	}
	return nil
}

// CRC32Check is m's data as a run whose CRC-32 a caller compares
// (formats.CRC32Deferrer) instead of CheckCRC.
func (m *Member) CRC32Check() formats.CRC32Check {
	return formats.CRC32Check{Offset: m.Data, Size: m.Size, Want: m.CRC, Member: m.Name}
}

// ReadAt fills b from r at off; a short read is a truncated file
// (invalid_archive, in package pkg's name).
func ReadAt(r io.ReaderAt, b []byte, off int64, pkg, path string) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errs.At(errs.InvalidArchive, pkg, path, off+int64(n), "file ends after %d of %d bytes read here", n, len(b))
	}
	return fmt.Errorf("%s: read %s at %d: %w", pkg, path, off, err)
}
