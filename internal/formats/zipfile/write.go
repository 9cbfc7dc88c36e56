package zipfile

import (
	"encoding/binary"
	"hash/crc32"
	"slices"

	"github.com/mstore/mstore/internal/formats"
)

// Alignment is where Writer puts every member's data (torch.save's rule,
// which its .storage_alignment record states): a multiple of 64 bytes,
// reached by padding the local header's extra field ("FB" record of 'Z's),
// as caffe2/serialize/inline_container.cc does.
const Alignment = 64

const max32 = 0xffffffff

// Writer lays out a stored zip archive, without I/O, the way torch.save
// (miniz) writes it, which every zip reader (Python's zipfile, numpy.load)
// reads: zero times, data descriptors after non-empty members, zip64
// fields only where a value needs them, and a zip64 end record always.
// Frame bytes accumulate until a tensor's data, which becomes a tensor
// extent; CRC-32s of tensors are left to the writer as slots.
type Writer struct {
	file formats.File
	// The frame being made is block[start:]; the frames before it in block
	// are Layout extents already. Frames share blocks, as their CRC-32
	// slots share slotBlock: an .npz of 100,000 small arrays is 100,000
	// frames of a few hundred bytes, which took an allocation each and
	// grew by doubling (37 of its 160 MB planned).
	block     []byte
	start     int
	slotBlock []formats.CRC32Slot
	slotStart int
	off       int64 // file offset of the next byte
	central   []centralEntry
	Force64   bool // tests: zip64 fields on every member
	// SizesInLocal writes each member's sizes in its local header too (the
	// CRC-32 still follows the data), so that Scan, which reads in one
	// pass, knows where the data ends. Zip readers take either.
	SizesInLocal bool
}

// blockSize is the size of the blocks frames are made in; a larger frame
// has a block of its own.
const blockSize = 256 << 10

type centralEntry struct {
	name   string
	flags  uint16
	crc    uint32
	tensor int // CRC slot tensor, or -1 when crc is known
	// prefixCRC and prefixLen: what the member holds before the tensor
	// (CRC32Slot.PrefixCRC)
	prefixCRC uint32
	prefixLen int64
	size      int64 // the member's size
	header    int64
}

// Expect makes room for members more members: their extents (a frame and
// a tensor each) and central directory entries, which grew by doubling
// for an .npz of 100,000 arrays.
func (w *Writer) Expect(members int) {
	w.file.Extents = slices.Grow(w.file.Extents, 2*members+1)
	w.central = slices.Grow(w.central, members)
}

func (w *Writer) put(b ...byte) {
	if len(w.block)+len(b) > cap(w.block) {
		frame := w.block[w.start:]
		w.block = append(make([]byte, 0, max(blockSize, 2*(len(frame)+len(b)))), frame...)
		w.start = 0
	}
	w.block = append(w.block, b...)
	w.off += int64(len(b))
}

func (w *Writer) u16(v uint16) { w.put(byte(v), byte(v>>8)) }
func (w *Writer) u32(v uint32) { w.put(byte(v), byte(v>>8), byte(v>>16), byte(v>>24)) }
func (w *Writer) u64(v uint64) { w.u32(uint32(v)); w.u32(uint32(v >> 32)) }

// slot reserves 4 bytes for the CRC-32 of e, a member holding a prefix
// and then a tensor.
func (w *Writer) slot(e centralEntry) {
	s := formats.CRC32Slot{At: len(w.block) - w.start, Tensor: int32(e.tensor)}
	if e.prefixLen > 0 {
		s.PrefixCRC, s.Size = e.prefixCRC, e.size-e.prefixLen
	}
	if len(w.slotBlock) == cap(w.slotBlock) {
		slots := w.slotBlock[w.slotStart:]
		w.slotBlock = append(make([]formats.CRC32Slot, 0, max(blockSize/64, 2*len(slots))), slots...)
		w.slotStart = 0
	}
	w.slotBlock = append(w.slotBlock, s)
	w.put(0, 0, 0, 0)
}

// flush ends the current frame and returns its bytes.
func (w *Writer) flush() []byte {
	frame := w.block[w.start:len(w.block):len(w.block)]
	if len(frame) == 0 {
		return nil
	}
	var slots []formats.CRC32Slot
	if len(w.slotBlock) > w.slotStart {
		slots = w.slotBlock[w.slotStart:len(w.slotBlock):len(w.slotBlock)]
	}
	w.file.Extents = append(w.file.Extents, formats.Extent{Kind: formats.Frame, Offset: w.off - int64(len(frame)), Size: int64(len(frame)),
		Bytes: frame, CRC32s: slots})
	w.start, w.slotStart = len(w.block), len(w.slotBlock)
	return frame
}

// header writes a member's local header, padded so that its data starts
// at a multiple of Alignment.
func (w *Writer) header(name string, size int64) (zip64 bool, flags uint16) {
	flags = 1 << 11 // names are UTF-8
	if size > 0 {
		flags |= flagDescriptor
	}
	big, far := size >= max32 || w.Force64, w.off >= max32 || w.Force64
	var z64 []byte
	if big || far {
		z64 = binary.LittleEndian.AppendUint16(nil, zip64ExtraID)
		n := 0
		if big {
			n += 16
		}
		if far {
			n += 8
		}
		z64 = binary.LittleEndian.AppendUint16(z64, uint16(n))
		if big {
			z64 = binary.LittleEndian.AppendUint64(z64, uint64(size))
			z64 = binary.LittleEndian.AppendUint64(z64, uint64(size))
		}
		if far {
			z64 = binary.LittleEndian.AppendUint64(z64, uint64(w.off))
		}
	}
	start := w.off + localSize + int64(len(name)) + int64(len(z64)) + 4
	pad := (Alignment - start%Alignment) % Alignment
	w.u32(sigLocal)
	w.u16(0) // version needed, as torch writes it
	w.u16(flags)
	w.u16(methodStored)
	w.u32(0) // time and date: torch writes none
	w.u32(0) // CRC and sizes follow the data
	if w.SizesInLocal && !(z64 != nil && big) {
		w.u32(uint32(size))
		w.u32(uint32(size))
	} else if w.SizesInLocal {
		w.u32(max32) // in the zip64 field
		w.u32(max32)
	} else {
		w.u32(0)
		w.u32(0)
	}
	w.u16(uint16(len(name)))
	w.u16(uint16(len(z64) + 4 + int(pad)))
	w.put([]byte(name)...)
	w.put(z64...)
	w.put('F', 'B', byte(pad), byte(pad>>8))
	for range pad {
		w.put('Z')
	}
	return z64 != nil, flags
}

// descriptor writes the data descriptor after a non-empty member.
func (w *Writer) descriptor(zip64 bool, e centralEntry) {
	if e.size == 0 {
		return
	}
	w.u32(sigDescriptor)
	if e.tensor >= 0 {
		w.slot(e)
	} else {
		w.u32(e.crc)
	}
	if zip64 {
		w.u64(uint64(e.size))
		w.u64(uint64(e.size))
	} else {
		w.u32(uint32(e.size))
		w.u32(uint32(e.size))
	}
}

// AddBytes adds a member whose content is known.
func (w *Writer) AddBytes(name string, data []byte) {
	at := w.off
	zip64, flags := w.header(name, int64(len(data)))
	w.put(data...)
	e := centralEntry{name: name, flags: flags, crc: crc32.ChecksumIEEE(data), tensor: -1, size: int64(len(data)), header: at}
	w.descriptor(zip64, e)
	w.central = append(w.central, e)
}

// AddTensor adds a member holding Layout.Tensors[tensor]'s size bytes.
func (w *Writer) AddTensor(name string, tensor int, size int64) {
	at := w.off
	zip64, flags := w.header(name, size)
	w.flush()
	w.file.Extents = append(w.file.Extents, formats.Extent{Kind: formats.TensorData, Offset: w.off, Size: size, Tensor: tensor})
	w.off += size
	e := centralEntry{name: name, flags: flags, tensor: tensor, size: size, header: at}
	if size == 0 {
		e.tensor = -1 // the CRC of nothing is 0
	}
	w.descriptor(zip64, e)
	w.central = append(w.central, e)
}

// AddTensorAfter adds a member holding prefix (an .npy header) and then
// Layout.Tensors[tensor]'s size bytes; its CRC-32 slots cover both.
func (w *Writer) AddTensorAfter(name string, prefix []byte, tensor int, size int64) {
	at, total := w.off, int64(len(prefix))+size
	zip64, flags := w.header(name, total)
	w.put(prefix...)
	w.flush()
	w.file.Extents = append(w.file.Extents, formats.Extent{Kind: formats.TensorData, Offset: w.off, Size: size, Tensor: tensor})
	w.off += size
	e := centralEntry{name: name, flags: flags, tensor: tensor, prefixCRC: crc32.ChecksumIEEE(prefix), prefixLen: int64(len(prefix)), size: total, header: at}
	if size == 0 {
		e.tensor, e.crc = -1, e.prefixCRC // known: the prefix alone
	}
	w.descriptor(zip64, e)
	w.central = append(w.central, e)
}

// Finish writes the central directory and the end records and returns the
// file's layout.
func (w *Writer) Finish(path string) formats.File {
	cdStart := w.off
	for _, e := range w.central {
		big, far := e.size >= max32 || w.Force64, e.header >= max32 || w.Force64
		var z64 []byte
		if big || far {
			n := 0
			if big {
				n += 16
			}
			if far {
				n += 8
			}
			z64 = binary.LittleEndian.AppendUint16(binary.LittleEndian.AppendUint16(nil, zip64ExtraID), uint16(n))
			if big {
				z64 = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(z64, uint64(e.size)), uint64(e.size))
			}
			if far {
				z64 = binary.LittleEndian.AppendUint64(z64, uint64(e.header))
			}
		}
		w.u32(sigCentral)
		w.u16(0) // version made by
		w.u16(0) // version needed
		w.u16(e.flags)
		w.u16(methodStored)
		w.u32(0) // time and date
		if e.tensor >= 0 {
			w.slot(e)
		} else {
			w.u32(e.crc)
		}
		size := uint32(min(e.size, max32))
		if big {
			size = max32
		}
		w.u32(size)
		w.u32(size)
		w.u16(uint16(len(e.name)))
		w.u16(uint16(len(z64)))
		w.u16(0) // comment
		w.u16(0) // disk
		w.u16(0) // internal attributes
		w.u32(0) // external attributes
		header := uint32(min(e.header, max32))
		if far {
			header = max32
		}
		w.u32(header)
		w.put([]byte(e.name)...)
		w.put(z64...)
	}
	cdSize, end64 := w.off-cdStart, w.off
	n := uint64(len(w.central))
	w.u32(sigEnd64)
	w.u64(end64Size - 12)
	w.u16(0x031e) // version made by, as miniz writes it
	w.u16(0x002d) // version needed: 4.5, zip64
	w.u32(0)
	w.u32(0)
	w.u64(n)
	w.u64(n)
	w.u64(uint64(cdSize))
	w.u64(uint64(cdStart))
	w.u32(sigLocator64)
	w.u32(0)
	w.u64(uint64(end64))
	w.u32(1)
	w.u32(sigEnd)
	w.u16(0)
	w.u16(0)
	w.u16(uint16(min(n, 0xffff)))
	w.u16(uint16(min(n, 0xffff)))
	w.u32(uint32(min(cdSize, max32)))
	w.u32(uint32(min(cdStart, max32)))
	w.u16(0) // comment
	w.flush()
	w.file.Path, w.file.Size = path, w.off
	return w.file
}
