package zipfile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
)

// Scan reads the zip file r of size bytes once, from its first byte to its
// last, for a codec whose files must be read in one pass (add stores the
// decoded stream of a compressed file, and checks that the decoder read
// the bytes the parser read). A member's local header carries its sizes
// (as Python's zipfile writes them to a file), or, for a deflated member
// followed by a data descriptor (as Go's archive/zip writes it), they are
// unknown (Size -1): fn then gets a byte-exact reader of the rest of the
// file (an io.ByteReader, so that a flate reader stops at the end of the
// deflate stream), must read the whole stream and set USize, and the
// descriptor is checked against what it read. Otherwise fn gets a reader
// of exactly Size bytes, which it may leave unread. The central directory and the end records that
// follow must agree with the local headers; nothing may follow them.
func Scan(r io.Reader, size int64, path, pkg string, lim Limits, fn func(m *Member, data io.Reader) error) (*Archive, error) {
	s := &scanner{br: bufio.NewReaderSize(r, 64<<10), a: &Archive{Path: path, Size: size, Pkg: pkg}}
	byName := map[string]*Member{}
	for {
		sig, err := s.peekSig()
		if err != nil {
			return nil, err
		}
		if sig != sigLocal {
			break
		}
		m, err := s.local()
		if err != nil {
			return nil, err
		}
		if int64(len(s.a.Members)) >= lim.MaxMembers {
			return nil, s.fail(errs.SizeLimitExceeded, m.Header, "more than %d members", lim.MaxMembers)
		}
		if byName[m.Name] != nil {
			return nil, s.fail(errs.SchemaError, m.Header, "member %q appears twice in the archive", m.Name)
		}
		byName[m.Name] = m
		s.a.Members = append(s.a.Members, m)
		if m.Size < 0 {
			bc := &byteCounter{br: s.br}
			if err := fn(m, bc); err != nil {
				return nil, err
			}
			m.Size, s.off = bc.n, m.Data+bc.n
			if err := s.descriptor(m); err != nil {
				return nil, err
			}
			m.End = s.off
			continue
		}
		data := &countingReader{r: io.LimitReader(s.br, m.Size)}
		if err := fn(m, data); err != nil {
			return nil, err
		}
		if _, err := io.Copy(io.Discard, data); err != nil {
			return nil, fmt.Errorf("%s: read %s: %w", pkg, path, err)
		}
		s.off = m.Data + data.n
		if data.n < m.Size {
			return nil, s.fail(errs.InvalidArchive, s.off, "member %q: the file ends inside its data", m.Name)
		}
		if m.Flags&flagDescriptor != 0 {
			if err := s.descriptor(m); err != nil {
				return nil, err
			}
		}
		m.End = m.Data + m.Size
	}
	if len(s.a.Members) == 0 {
		return nil, s.fail(errs.SchemaError, s.off, "the archive holds no members")
	}
	s.a.CDStart = s.off
	if err := s.central(byName, lim); err != nil {
		return nil, err
	}
	return s.a, nil
}

type scanner struct {
	br  *bufio.Reader
	a   *Archive
	off int64 // of the next byte
	eof bool
}

func (s *scanner) fail(class errs.Class, at int64, format string, args ...any) error {
	return errs.At(class, s.a.Pkg, s.a.Path, at, format, args...)
}

// descriptor reads the data descriptor after m's data: an optional
// signature, the CRC-32, then both sizes (8 bytes each with a zip64 local
// field), which must be the local header's.
func (s *scanner) descriptor(m *Member) error {
	le := binary.LittleEndian
	at := s.off
	if sig, err := s.peekSig(); err != nil {
		return err
	} else if sig == sigDescriptor {
		if _, err := s.read(4); err != nil {
			return err
		}
	}
	width := 4
	if m.Zip64 {
		width = 8
	}
	b, err := s.read(4 + 2*width)
	if err != nil {
		return err
	}
	csize, usize := uint64(le.Uint32(b[4:])), uint64(le.Uint32(b[8:]))
	if width == 8 {
		csize, usize = le.Uint64(b[4:]), le.Uint64(b[12:])
	}
	if csize != uint64(m.Size) || usize != uint64(m.USize) {
		return s.fail(errs.InvalidArchive, at, "member %q: its data descriptor and local header disagree about its size", m.Name)
	}
	m.CRC = le.Uint32(b)
	return nil
}

// byteCounter is a byte-exact reader of the file that counts what is read.
type byteCounter struct {
	br *bufio.Reader
	n  int64
}

func (c *byteCounter) Read(p []byte) (int, error) {
	n, err := c.br.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *byteCounter) ReadByte() (byte, error) {
	b, err := c.br.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (s *scanner) read(n int) ([]byte, error) {
	b := make([]byte, n)
	got, err := io.ReadFull(s.br, b)
	s.off += int64(got)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, s.fail(errs.InvalidArchive, s.off, "the file ends after %d of the %d bytes of a zip record", got, n)
		}
		return nil, fmt.Errorf("%s: read %s: %w", s.a.Pkg, s.a.Path, err)
	}
	return b, nil
}

func (s *scanner) peekSig() (uint32, error) {
	b, err := s.br.Peek(4)
	if len(b) < 4 {
		if err == nil || errors.Is(err, io.EOF) {
			return 0, s.fail(errs.InvalidArchive, s.off, "the file ends where a zip record should start (truncated, or not a zip archive)")
		}
		return 0, fmt.Errorf("%s: read %s: %w", s.a.Pkg, s.a.Path, err)
	}
	return binary.LittleEndian.Uint32(b), nil
}

// local reads a local header with its sizes.
func (s *scanner) local() (*Member, error) {
	le := binary.LittleEndian
	at := s.off
	h, err := s.read(localSize)
	if err != nil {
		return nil, err
	}
	nameLen, extraLen := int(le.Uint16(h[26:])), int(le.Uint16(h[28:]))
	ne, err := s.read(nameLen + extraLen)
	if err != nil {
		return nil, err
	}
	m := &Member{Name: string(ne[:nameLen]), Flags: le.Uint16(h[6:]), Method: le.Uint16(h[8:]), Time: le.Uint16(h[10:]),
		Date: le.Uint16(h[12:]), CRC: le.Uint32(h[14:]), Header: at}
	csize, usize := uint64(le.Uint32(h[18:])), uint64(le.Uint32(h[22:]))
	z, ok, err := zip64Field(ne[nameLen:])
	if err != nil {
		return nil, s.fail(errs.InvalidArchive, at, "member %q: local %v", m.Name, err)
	}
	if ok {
		m.Zip64 = true
		if usize == max32 && len(z) >= 8 {
			usize, z = le.Uint64(z), z[8:]
		}
		if csize == max32 && len(z) >= 8 {
			csize = le.Uint64(z)
		}
	}
	clean := strings.TrimSuffix(m.Name, "/")
	switch {
	case m.Flags&(flagEncrypted|flagStrongEnc|flagMaskedCD) != 0:
		return nil, s.fail(errs.UnsupportedVersion, at, "member %q is encrypted: encrypted archives are not supported", m.Name)
	case m.Flags&flagDescriptor != 0 && m.Method == methodDeflate && usize == 0 && csize == 0 && m.CRC == 0:
		if !formats.IsMemberPath(clean) {
			return nil, s.fail(errs.PathTraversal, at, "member name %q is not a clean relative path inside the archive", m.Name)
		}
		m.Size, m.USize, m.Data = -1, -1, s.off // known once the deflate stream ends
		return m, nil
	case m.Flags&flagDescriptor != 0 && (m.CRC != 0 || usize == 0 && csize == 0 && !strings.HasSuffix(m.Name, "/")):
		return nil, s.fail(errs.UnsupportedVersion, at, "member %q has its sizes only after its data (a zip written to a stream), which this reader does not take", m.Name)
	case usize > 1<<62 || csize > 1<<62:
		return nil, s.fail(errs.InvalidArchive, at, "member %q: size out of range", m.Name)
	case m.Method == methodStored && csize != usize:
		return nil, s.fail(errs.InvalidArchive, at, "member %q is stored but its compressed size %d differs from its size %d", m.Name, csize, usize)
	case !formats.IsMemberPath(clean):
		return nil, s.fail(errs.PathTraversal, at, "member name %q is not a clean relative path inside the archive", m.Name)
	}
	m.Size, m.USize, m.Data = int64(csize), int64(usize), s.off
	m.Dir = strings.HasSuffix(m.Name, "/") && usize == 0
	return m, nil
}

// central reads the central directory and the end records, which must
// agree with the members read, and end the file.
func (s *scanner) central(byName map[string]*Member, lim Limits) error {
	le := binary.LittleEndian
	seen := 0
	for {
		sig, err := s.peekSig()
		if err != nil {
			return err
		}
		if sig != sigCentral {
			break
		}
		if s.off-s.a.CDStart > lim.MaxCentralDirectory {
			return s.fail(errs.SizeLimitExceeded, s.off, "central directory over the %d-byte limit", lim.MaxCentralDirectory)
		}
		at := s.off
		h, err := s.read(centralSize)
		if err != nil {
			return err
		}
		nameLen, extraLen, commentLen := int(le.Uint16(h[28:])), int(le.Uint16(h[30:])), int(le.Uint16(h[32:]))
		rest, err := s.read(nameLen + extraLen + commentLen)
		if err != nil {
			return err
		}
		name := string(rest[:nameLen])
		m := byName[name]
		csize, usize, offset := uint64(le.Uint32(h[20:])), uint64(le.Uint32(h[24:])), uint64(le.Uint32(h[42:]))
		z, ok, err := zip64Field(rest[nameLen : nameLen+extraLen])
		if err != nil {
			return s.fail(errs.InvalidArchive, at, "member %q: %v", name, err)
		}
		if ok {
			for _, v := range []*uint64{&usize, &csize, &offset} {
				if *v == max32 && len(z) >= 8 {
					*v, z = le.Uint64(z), z[8:]
				}
			}
		}
		if m == nil || le.Uint16(h[8:]) != m.Flags || le.Uint16(h[10:]) != m.Method || le.Uint16(h[12:]) != m.Time ||
			le.Uint16(h[14:]) != m.Date || le.Uint32(h[16:]) != m.CRC || csize != uint64(m.Size) || usize != uint64(m.USize) ||
			offset != uint64(m.Header) || le.Uint16(h[34:]) != 0 {
			return s.fail(errs.InvalidArchive, at, "central directory entry %q disagrees with the member's local header", name)
		}
		seen++
	}
	if seen != len(s.a.Members) {
		return s.fail(errs.InvalidArchive, s.off, "the central directory lists %d of the %d members", seen, len(s.a.Members))
	}
	cdSize := s.off - s.a.CDStart
	if sig, err := s.peekSig(); err != nil {
		return err
	} else if sig == sigEnd64 {
		at := s.off
		rec, err := s.read(end64Size)
		if err != nil {
			return err
		}
		if le.Uint64(rec[4:]) != end64Size-12 {
			return s.fail(errs.UnsupportedVersion, at, "a zip64 end record with extensible data is not supported")
		}
		if le.Uint64(rec[32:]) != uint64(seen) || le.Uint64(rec[40:]) != uint64(cdSize) || le.Uint64(rec[48:]) != uint64(s.a.CDStart) ||
			le.Uint32(rec[16:]) != 0 || le.Uint32(rec[20:]) != 0 {
			return s.fail(errs.InvalidArchive, at, "the zip64 end record disagrees with the central directory")
		}
		loc, err := s.read(locator64Size)
		if err != nil {
			return err
		}
		if le.Uint32(loc) != sigLocator64 || le.Uint64(loc[8:]) != uint64(at) || le.Uint32(loc[16:]) != 1 {
			return s.fail(errs.InvalidArchive, at+end64Size, "no zip64 end record locator after the zip64 end record")
		}
	}
	at := s.off
	end, err := s.read(endSize)
	if err != nil {
		return err
	}
	if le.Uint32(end) != sigEnd {
		return s.fail(errs.InvalidArchive, at, "no end of central directory record after the central directory")
	}
	entries, size, offset := uint64(le.Uint16(end[10:])), uint64(le.Uint32(end[12:])), uint64(le.Uint32(end[16:]))
	if entries != 0xffff && entries != uint64(seen) || size != max32 && size != uint64(cdSize) || offset != max32 && offset != uint64(s.a.CDStart) ||
		le.Uint16(end[4:]) != 0 || le.Uint16(end[6:]) != 0 {
		return s.fail(errs.InvalidArchive, at, "the end record disagrees with the central directory")
	}
	if _, err := s.read(int(le.Uint16(end[20:]))); err != nil { // the comment
		return err
	}
	if n, _ := s.br.Read(make([]byte, 1)); n > 0 {
		return s.fail(errs.InvalidArchive, s.off, "bytes after the end of central directory record")
	}
	if s.a.Size >= 0 && s.off != s.a.Size {
		return s.fail(errs.InvalidArchive, s.off, "the archive ends at %d of %d bytes", s.off, s.a.Size)
	}
	return nil
}
