package npz

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/zipfile"
)

// An .npz whose members are deflated (np.savez_compressed) is stored as
// its decoded stream (formats.MetaCompression = Compression): for each
// member, a record (its name, modification time and size: what the
// canonical encoding keeps) and then its
// .npy bytes, decompressed, so that the arrays are tensors like any other;
// then a trailer. Checkout writes the stream back through Encoding, which
// deflates every member again canonically (Go's archive/zip, the same
// bytes every time from the same build): the arrays, names and times are
// the ones added, the compressed bytes in general not.

// Compression is the File.Meta[formats.MetaCompression] of a deflated .npz.
const Compression = "npz-deflate-canonical"

const (
	recordMagic  = "NPZ\x01"
	trailerMagic = "NPZ\x00"
	trailerSize  = 12
)

// member is an .npz member as a scan found it: its .npy header (head) and
// array, nil for a directory entry.
type member struct {
	z    *zipfile.Member
	head []byte
	a    *array
	crc  uint32 // of the data as read
}

// record is a member's record in the decoded stream.
func record(m *member) []byte {
	b := []byte(recordMagic)
	le := binary.LittleEndian
	b = le.AppendUint16(b, m.z.Time)
	b = le.AppendUint16(b, m.z.Date)
	b = le.AppendUint64(b, uint64(m.z.USize))
	b = le.AppendUint16(b, uint16(len(m.z.Name)))
	return append(b, m.z.Name...)
}

func trailer(n int) []byte {
	return binary.LittleEndian.AppendUint64([]byte(trailerMagic), uint64(n))
}

// scan reads the .npz r of size bytes in one pass (zipfile.Scan): every
// member an .npy, stored or deflated, whose header it parses and whose
// decompressed size and CRC-32 it checks. emit, when set, gets each
// member and a reader of the rest of its data (after head).
func scan(r io.Reader, size int64, p string, emit func(m *member, rest io.Reader) error) ([]*member, error) {
	var out []*member
	// One buffer for every member (Reset): a new one each was 4 KiB of
	// garbage per array, 400 MB for an .npz of 100,000.
	br := bufio.NewReader(nil)
	_, err := zipfile.Scan(r, size, p, pkg, zipLimits, func(zm *zipfile.Member, data io.Reader) error {
		m := &member{z: zm}
		switch {
		case zm.Dir:
			out = append(out, m)
			if emit != nil {
				return emit(m, bytes.NewReader(nil))
			}
			return nil
		case !strings.HasSuffix(zm.Name, ".npy"):
			return errs.At(errs.SchemaError, pkg, p, zm.Header, "member %q is not an .npy array (numpy.savez writes NAME.npy members only)", zm.Name)
		case zm.Method != zipfile.Stored && zm.Method != zipfile.Deflate:
			return errs.At(errs.UnsupportedVersion, pkg, p, zm.Header, "member %q is compressed with method %d; this build reads stored and deflated members", zm.Name, zm.Method)
		}
		var src io.Reader = data
		if zm.Method == zipfile.Deflate {
			fr := flate.NewReader(data)
			defer fr.Close()
			src = fr
		}
		h := crc32.NewIEEE()
		unknown := zm.USize < 0 // a data descriptor follows: the .npy header says
		limit := zm.USize + 1
		if unknown {
			limit = 1 << 62
		}
		cr := &countReader{r: io.TeeReader(io.LimitReader(src, limit), h)}
		br.Reset(cr)
		need := func(n int64) ([]byte, error) {
			if !unknown && n > zm.USize {
				return nil, errs.At(errs.InvalidArchive, pkg, p, zm.Data, "member %q: the .npy header runs past the member's %d bytes", zm.Name, zm.USize)
			}
			b, err := br.Peek(int(n))
			if err != nil {
				return nil, errs.At(errs.InvalidArchive, pkg, p, zm.Data, "member %q: %v", zm.Name, err)
			}
			return b, nil
		}
		head, err := need(12)
		if !unknown && zm.USize < 12 {
			head, err = need(zm.USize)
		}
		if err != nil {
			return err
		}
		a, err := parseNPY(head, need, p+": "+zm.Name)
		if err != nil {
			return err
		}
		if unknown {
			zm.USize = a.header + a.dataSize
		}
		if a.header+a.dataSize != zm.USize {
			return errs.At(errs.SchemaError, pkg, p, zm.Data, "member %q holds %d bytes after its .npy header, and its dtype %s and shape %v make %d", zm.Name, zm.USize-a.header, a.descr, a.shape, a.dataSize)
		}
		m.a, m.head = a, make([]byte, a.header)
		if _, err := io.ReadFull(br, m.head); err != nil {
			return errs.At(errs.InvalidArchive, pkg, p, zm.Data, "member %q: %v", zm.Name, err)
		}
		out = append(out, m)
		rest := io.Reader(br)
		if emit != nil {
			if err := emit(m, io.LimitReader(br, a.dataSize)); err != nil {
				return err
			}
		}
		if _, err := io.Copy(io.Discard, rest); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "flate") {
				return errs.Wrap(errs.InvalidArchive, pkg, err, "%s: member %q does not decompress", p, zm.Name)
			}
			return err
		}
		if cr.n != zm.USize {
			return errs.At(errs.InvalidArchive, pkg, p, zm.Data, "member %q decompresses to %d bytes, its header says %d", zm.Name, cr.n, zm.USize)
		}
		m.crc = h.Sum32()
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, m := range out { // a data descriptor's CRC-32 is known only after the data
		if m.a != nil && m.crc != m.z.CRC {
			return nil, errs.At(errs.InvalidArchive, pkg, p, m.z.Data, "member %q: CRC-32 mismatch (the data is corrupt)", m.z.Name)
		}
	}
	return out, nil
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Decode returns the decoded stream of a deflated .npz (see Compression).
func (c codec) Decode(dir formats.Dir, p string) (io.ReadCloser, error) {
	f, err := dir.Open(p)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		defer f.Close()
		n := 0
		_, err := scan(io.NewSectionReader(f, 0, f.Size()), f.Size(), p, func(m *member, rest io.Reader) error {
			n++
			if _, err := pw.Write(append(record(m), m.head...)); err != nil {
				return err
			}
			_, err := io.Copy(pw, rest)
			return err
		})
		if err == nil {
			_, err = pw.Write(trailer(n))
		}
		pw.CloseWithError(err)
	}()
	return pr, nil
}

// Encoding returns the writer that turns a decoded stream back into a
// deflated .npz.
func (codec) Encoding(name string) (func(io.Writer) io.WriteCloser, bool) {
	if name != Compression {
		return nil, false
	}
	return newEncoder, true
}

// encoder reads a decoded stream written to it and writes the .npz.
type encoder struct {
	pw   *io.PipeWriter
	done chan error
}

func newEncoder(w io.Writer) io.WriteCloser {
	pr, pw := io.Pipe()
	e := &encoder{pw: pw, done: make(chan error, 1)}
	go func() {
		err := encode(bufio.NewReader(pr), w)
		pr.CloseWithError(err)
		e.done <- err
	}()
	return e
}

func (e *encoder) Write(p []byte) (int, error) { return e.pw.Write(p) }

func (e *encoder) Close() error {
	e.pw.Close()
	return <-e.done
}

func encode(r *bufio.Reader, w io.Writer) error {
	le := binary.LittleEndian
	zw := zip.NewWriter(w)
	count := 0
	for {
		magic := make([]byte, 4)
		if _, err := io.ReadFull(r, magic); err != nil {
			return fmt.Errorf("npz: encode: %w", err)
		}
		if string(magic) == trailerMagic {
			var n [8]byte
			if _, err := io.ReadFull(r, n[:]); err != nil || le.Uint64(n[:]) != uint64(count) {
				return errors.New("npz: encode: the stream's trailer does not count its members")
			}
			if _, err := r.ReadByte(); err != io.EOF {
				return errors.New("npz: encode: bytes after the stream's trailer")
			}
			return zw.Close()
		}
		if string(magic) != recordMagic {
			return errors.New("npz: encode: not a decoded .npz stream")
		}
		var h [14]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return fmt.Errorf("npz: encode: %w", err)
		}
		name := make([]byte, le.Uint16(h[12:]))
		if _, err := io.ReadFull(r, name); err != nil {
			return fmt.Errorf("npz: encode: %w", err)
		}
		fh := &zip.FileHeader{Name: string(name), Method: zip.Deflate, ModifiedTime: le.Uint16(h[0:]), ModifiedDate: le.Uint16(h[2:])}
		usize := int64(le.Uint64(h[4:]))
		if strings.HasSuffix(fh.Name, "/") && usize == 0 {
			fh.Method = zip.Store
		}
		mw, err := zw.CreateHeader(fh)
		if err != nil {
			return fmt.Errorf("npz: encode: %w", err)
		}
		if _, err := io.CopyN(mw, r, usize); err != nil {
			return fmt.Errorf("npz: encode: %w", err)
		}
		count++
	}
}
