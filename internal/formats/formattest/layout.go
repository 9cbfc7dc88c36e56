package formattest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"testing"

	"github.com/mstore/mstore/internal/formats"
)

// CheckLayout reports the first way in which l does not describe files:
// files out of path order or missing, extents that do not cover a file
// exactly from offset 0, frame bytes (in a planned layout) that differ from
// the file, zero extents over non-zero bytes, tensor references out of
// range, tensor extents that are not the whole tensor (the archiver's rule:
// a tensor is one whole run of bytes, which a layout may place more than
// once, each placement the same bytes), or repeated placements whose bytes
// differ. Every tensor must appear in some file; names must be unique.
func CheckLayout(l *formats.Layout, files map[string][]byte) error {
	if l == nil {
		return fmt.Errorf("no layout")
	}
	referenced := make([]bool, len(l.Tensors))
	first := make([][]byte, len(l.Tensors))
	for i, f := range l.Files {
		if i > 0 && l.Files[i-1].Path >= f.Path {
			return fmt.Errorf("files not in strict path order at %q", f.Path)
		}
		b, ok := files[f.Path]
		if !ok {
			return fmt.Errorf("%s: no such file", f.Path)
		}
		if f.Size != int64(len(b)) {
			return fmt.Errorf("%s: size %d, the file has %d bytes", f.Path, f.Size, len(b))
		}
		var off int64
		for j, e := range f.Extents {
			if e.Offset != off {
				return fmt.Errorf("%s: extent %d at offset %d, want %d", f.Path, j, e.Offset, off)
			}
			if e.Size < 0 || e.Size > f.Size-off {
				return fmt.Errorf("%s: extent %d of %d bytes at %d passes the end (%d)", f.Path, j, e.Size, off, f.Size)
			}
			run := b[off : off+e.Size]
			switch e.Kind {
			case formats.Frame:
				if e.Bytes != nil && !equalBesideSlots(e.Bytes, run, e.CRC32s) {
					return fmt.Errorf("%s: frame extent %d differs from the file", f.Path, j)
				}
			case formats.TensorData:
				if e.Tensor < 0 || e.Tensor >= len(l.Tensors) {
					return fmt.Errorf("%s: extent %d names tensor %d of %d", f.Path, j, e.Tensor, len(l.Tensors))
				}
				if want := l.Tensors[e.Tensor].Size; e.Size != want {
					return fmt.Errorf("%s: extent %d holds %d bytes of tensor %q, which is %d: a tensor extent is the whole tensor", f.Path, j, e.Size, l.Tensors[e.Tensor].Name, want)
				}
				if referenced[e.Tensor] && !bytes.Equal(first[e.Tensor], run) {
					return fmt.Errorf("%s: extent %d places tensor %q again with other bytes", f.Path, j, l.Tensors[e.Tensor].Name)
				}
				referenced[e.Tensor], first[e.Tensor] = true, run
			case formats.Zeros:
				if bytes.ContainsFunc(run, func(r rune) bool { return r != 0 }) {
					return fmt.Errorf("%s: zeros extent %d holds non-zero bytes", f.Path, j)
				}
			default:
				return fmt.Errorf("%s: extent %d has invalid kind %d", f.Path, j, e.Kind)
			}
			off += e.Size
		}
		if off != f.Size {
			return fmt.Errorf("%s: extents cover %d of %d bytes", f.Path, off, f.Size)
		}
	}
	names := map[string]bool{}
	for i, tn := range l.Tensors {
		if names[tn.Name] {
			return fmt.Errorf("tensor name %q appears twice", tn.Name)
		}
		names[tn.Name] = true
		if tn.DType == "" || tn.Size < 0 || slices.ContainsFunc(tn.Shape, func(d int64) bool { return d < 0 }) {
			return fmt.Errorf("tensor %q: dtype %q, shape %v, size %d", tn.Name, tn.DType, tn.Shape, tn.Size)
		}
		if !referenced[i] {
			return fmt.Errorf("tensor %q is in no file", tn.Name)
		}
	}
	return nil
}

// TensorData returns the bytes of each of l's tensors, read from files
// through its extents. l must have passed CheckLayout.
func TensorData(l *formats.Layout, files map[string][]byte) ([][]byte, error) {
	out := make([][]byte, len(l.Tensors))
	for _, f := range l.Files {
		b := files[f.Path]
		for _, e := range f.Extents {
			if e.Kind != formats.TensorData {
				continue
			}
			if e.Tensor < 0 || e.Tensor >= len(out) || e.Offset < 0 || e.Size < 0 || e.Offset+e.Size > int64(len(b)) {
				return nil, fmt.Errorf("%s: tensor extent out of range", f.Path)
			}
			if out[e.Tensor] == nil { // each placement is the whole tensor
				out[e.Tensor] = b[e.Offset : e.Offset+e.Size : e.Offset+e.Size]
			}
		}
	}
	for i := range out {
		if out[i] == nil {
			out[i] = []byte{}
		}
	}
	return out, nil
}

// Materialize writes the files of a planned layout: frames from their
// literal Bytes, each tensor extent from data (the whole bytes of
// l.Tensors[i]), zeros as zeros.
func Materialize(l *formats.Layout, data [][]byte) (map[string][]byte, error) {
	if len(data) != len(l.Tensors) {
		return nil, fmt.Errorf("%d tensor contents for %d tensors", len(data), len(l.Tensors))
	}
	for i, tn := range l.Tensors {
		if int64(len(data[i])) != tn.Size {
			return nil, fmt.Errorf("tensor %q: %d bytes of content for size %d", tn.Name, len(data[i]), tn.Size)
		}
	}
	out := map[string][]byte{}
	for _, f := range l.Files {
		if f.Size < 0 || f.Size > math.MaxInt32 {
			return nil, fmt.Errorf("%s: size %d is not one a test writes", f.Path, f.Size)
		}
		if _, dup := out[f.Path]; dup {
			return nil, fmt.Errorf("%s: planned twice", f.Path)
		}
		buf := make([]byte, 0, f.Size)
		for j, e := range f.Extents {
			if e.Offset != int64(len(buf)) || e.Size < 0 {
				return nil, fmt.Errorf("%s: extent %d at %d (size %d), want offset %d", f.Path, j, e.Offset, e.Size, len(buf))
			}
			switch e.Kind {
			case formats.Frame:
				if int64(len(e.Bytes)) != e.Size {
					return nil, fmt.Errorf("%s: frame extent %d carries %d bytes for size %d", f.Path, j, len(e.Bytes), e.Size)
				}
				start := len(buf)
				buf = append(buf, e.Bytes...)
				for _, s := range e.CRC32s {
					if s.At < 0 || s.At > len(e.Bytes)-4 || s.Tensor < 0 || int(s.Tensor) >= len(data) {
						return nil, fmt.Errorf("%s: frame extent %d has a CRC-32 slot out of range", f.Path, j)
					}
					binary.LittleEndian.PutUint32(buf[start+s.At:], s.Value(crc32.ChecksumIEEE(data[s.Tensor])))
				}
			case formats.TensorData:
				if e.Tensor < 0 || e.Tensor >= len(data) || e.Size != l.Tensors[e.Tensor].Size {
					return nil, fmt.Errorf("%s: tensor extent %d is not one whole tensor", f.Path, j)
				}
				buf = append(buf, data[e.Tensor]...)
			case formats.Zeros:
				buf = append(buf, make([]byte, e.Size)...)
			default:
				return nil, fmt.Errorf("%s: extent %d has invalid kind %d", f.Path, j, e.Kind)
			}
		}
		if int64(len(buf)) != f.Size {
			return nil, fmt.Errorf("%s: extents give %d bytes, size is %d", f.Path, len(buf), f.Size)
		}
		out[f.Path] = buf
	}
	return out, nil
}

// equalBesideSlots compares a planned frame with the file's bytes, except
// for its CRC-32 slots, which only the written file holds.
func equalBesideSlots(planned, written []byte, slots []formats.CRC32Slot) bool {
	if len(slots) == 0 {
		return bytes.Equal(planned, written)
	}
	if len(planned) != len(written) {
		return false
	}
	masked := bytes.Clone(planned)
	for _, s := range slots {
		if s.At >= 0 && s.At <= len(masked)-4 {
			copy(masked[s.At:s.At+4], written[s.At:s.At+4])
		}
	}
	return bytes.Equal(masked, written)
}

// CheckReplanned is the second half of a codec's fuzz target: the tensors
// of l, which parse accepted from files, are planned again with replan,
// written with their bytes, and parsed back; a step that fails, or tensors
// read back different, fail t. It returns the layout read back.
func CheckReplanned(t testing.TB, l *formats.Layout, files map[string][]byte,
	replan func(*formats.Layout) (*formats.Layout, error), parse func(map[string][]byte) (*formats.Layout, error)) *formats.Layout {
	t.Helper()
	data, err := TensorData(l, files)
	if err != nil {
		t.Fatal(err)
	}
	planned, err := replan(l)
	if err != nil {
		t.Fatalf("accepted tensors cannot be planned again: %v", err)
	}
	written, err := Materialize(planned, data)
	if err != nil {
		t.Fatal(err)
	}
	back, err := parse(written)
	if err != nil {
		t.Fatalf("planned file does not parse: %v", err)
	}
	if err := SameTensors(l, data, back, written); err != nil {
		t.Fatal(err)
	}
	return back
}
