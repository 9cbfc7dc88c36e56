package archiver

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

// layoutPrint is a layout reduced to digests of everything the re-parse
// check compares (verifyStored): the first parse of a model is printed and
// dropped before the stored bytes are parsed again, so that two layouts of
// a model of 100,000 tensors (about 18 MB each) are never live together.
// Each file has a digest of its own and the tensors one per block of
// printBlock, so that a difference can still be named.
type layoutPrint struct {
	format  string
	files   []filePrint
	tensors int
	blocks  []objects.Digest // of tensors [i*printBlock, (i+1)*printBlock)
}

type filePrint struct {
	path   string
	digest objects.Digest
}

// printBlock is how many tensors share a digest in a layoutPrint.
const printBlock = 1024

// printer writes a layout's fields to a hasher, each length-prefixed so
// that no two layouts write the same bytes, through a small buffer.
type printer struct {
	h   *objects.Hasher
	buf []byte
}

func (p *printer) int(v int64) {
	p.buf = binary.AppendVarint(p.buf, v)
	p.flush(false)
}

func (p *printer) flag(v bool) {
	if v {
		p.int(1)
	} else {
		p.int(0)
	}
}

func (p *printer) bytes(b []byte, isNil bool) {
	if isNil {
		p.int(-1)
		return
	}
	p.int(int64(len(b)))
	p.buf = append(p.buf, b...)
	p.flush(false)
}

func (p *printer) str(s string) {
	p.int(int64(len(s)))
	p.buf = append(p.buf, s...)
	p.flush(false)
}

// meta prints a map in key order; a nil map is not an empty one (sameFile
// told them apart too).
func (p *printer) meta(m map[string]string) {
	if m == nil {
		p.int(-1)
		return
	}
	p.int(int64(len(m)))
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p.str(k)
		p.str(m[k])
	}
}

func (p *printer) flush(always bool) {
	if len(p.buf) >= 4096 || always && len(p.buf) > 0 {
		p.h.Write(p.buf)
		p.buf = p.buf[:0]
	}
}

// digest ends what was printed since the last digest and starts again.
func (p *printer) digest() objects.Digest {
	p.flush(true)
	d := p.h.Digest()
	p.h.Reset()
	return d
}

// printLayout prints l: every field of its files, extents and tensors.
func printLayout(l *formats.Layout) layoutPrint {
	p := &printer{h: objects.NewHasher(), buf: make([]byte, 0, 8192)}
	out := layoutPrint{format: l.Format, files: make([]filePrint, 0, len(l.Files)), tensors: len(l.Tensors)}
	for i := range l.Files {
		f := &l.Files[i]
		p.int(f.Size)
		p.flag(f.Index)
		p.meta(f.Meta)
		p.meta(f.StoredMeta)
		p.int(int64(len(f.Extents)))
		for j := range f.Extents {
			e := &f.Extents[j]
			p.int(int64(e.Kind))
			p.int(e.Offset)
			p.int(e.Size)
			p.int(int64(e.Tensor))
			p.bytes(e.Bytes, e.Bytes == nil)
			p.int(int64(len(e.CRC32s)))
			for _, s := range e.CRC32s {
				p.int(int64(s.At))
				p.int(int64(s.Tensor))
				p.int(s.Size)
				p.bytes(s.Prefix, false) // a nil prefix is an empty one (sameSlots)
			}
		}
		out.files = append(out.files, filePrint{path: f.Path, digest: p.digest()})
	}
	for i := range l.Tensors {
		t := &l.Tensors[i]
		p.str(t.Name)
		p.str(t.DType)
		p.int(int64(len(t.Shape)))
		for _, d := range t.Shape {
			p.int(d)
		}
		p.int(t.Size)
		if (i+1)%printBlock == 0 || i == len(l.Tensors)-1 {
			out.blocks = append(out.blocks, p.digest())
		}
	}
	return out
}

// difference names the first difference between two prints, or "".
func (a layoutPrint) difference(b layoutPrint) string {
	if a.format != b.format {
		return "format"
	}
	if len(a.files) != len(b.files) {
		return "number of files"
	}
	for i := range a.files {
		if a.files[i] != b.files[i] {
			return "file " + a.files[i].path
		}
	}
	if a.tensors != b.tensors {
		return "number of tensors"
	}
	for i := range a.blocks {
		if a.blocks[i] != b.blocks[i] {
			return fmt.Sprintf("tensors %d to %d", i*printBlock, min((i+1)*printBlock, a.tensors)-1)
		}
	}
	return ""
}
