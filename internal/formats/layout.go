package formats

import (
	"hash/crc32"
	"io"
)

// Layout is a model as a codec sees it: files cut into extents, and tensors.
type Layout struct {
	Format  string
	Files   []File
	Tensors []Tensor
}

// File is one file of a layout, relative to the model's root.
type File struct {
	Path string // slash-separated, clean, relative
	Size int64
	// Index is true for a shard index (model.safetensors.index.json) that the
	// codec validated and can regenerate.
	Index bool
	// Meta is format-specific metadata a writer needs again.
	Meta map[string]string
	// StoredMeta, when not nil, is what the manifest keeps instead of Meta:
	// the same, with values that the file's frames already hold kept by
	// reference (GGUF's tokenizer arrays), which the codec reads back from
	// the frames.
	StoredMeta map[string]string
	Extents    []Extent // cover [0, Size) in order, without gaps
}

// ExtentKind says what fills a run of a file. The zero value is invalid.
type ExtentKind int

const (
	_ ExtentKind = iota
	// Frame is container bytes that are not tensor data: headers, JSON, …
	Frame
	// TensorData is the bytes of Layout.Tensors[Extent.Tensor].
	TensorData
	// Zeros is Size zero bytes of padding.
	Zeros
)

// Extent is a run of a file's bytes.
type Extent struct {
	Kind   ExtentKind
	Offset int64 // in the file
	Size   int64
	Tensor int // index into Layout.Tensors, for TensorData
	// Bytes holds a frame's literal content in a planned layout. In a parsed
	// layout it is nil and the bytes are read from the file at Offset.
	Bytes []byte
	// CRC32s, in a planned frame, are places in Bytes that the writer fills
	// with the CRC-32 (IEEE) of a tensor's bytes, which a planner cannot
	// know: zip-based containers (PyTorch checkpoints) carry them in
	// headers that follow the data. The tensor comes earlier in the file.
	CRC32s []CRC32Slot
}

// CRC32Slot is 4 bytes of a planned frame, at At in its Bytes, that hold
// the little-endian CRC-32 of Layout.Tensors[Tensor], or, when Prefix is
// set, of Prefix followed by the tensor's Size bytes (a zip member whose
// data is a header and then the tensor: an .npy in an .npz). Fill it with
// Value.
type CRC32Slot struct {
	At     int
	Tensor int
	Prefix []byte
	Size   int64 // the tensor's size, with Prefix
}

// Value is the slot's CRC-32, given the CRC-32 of the tensor's bytes.
func (s CRC32Slot) Value(tensorCRC uint32) uint32 {
	if len(s.Prefix) == 0 {
		return tensorCRC
	}
	return CRC32Combine(crc32.ChecksumIEEE(s.Prefix), tensorCRC, s.Size)
}

// CRC32Combine is the CRC-32 (IEEE) of A followed by B, from the CRC-32s
// of A and of B and B's length (zlib's crc32_combine: multiply crcA by
// x^(8·lenB) modulo the polynomial, in GF(2), then add crcB).
func CRC32Combine(crcA, crcB uint32, lenB int64) uint32 {
	if lenB <= 0 {
		return crcA
	}
	var even, odd [32]uint32
	odd[0] = 0xedb88320 // the reversed polynomial: the operator of one zero bit
	row := uint32(1)
	for i := 1; i < 32; i++ {
		odd[i] = row
		row <<= 1
	}
	square := func(dst, src *[32]uint32) {
		for i := range 32 {
			dst[i] = gf2Times(src, src[i])
		}
	}
	square(&even, &odd) // two zero bits
	square(&odd, &even) // four
	for {
		square(&even, &odd) // apply a zero byte's operator power by power
		if lenB&1 != 0 {
			crcA = gf2Times(&even, crcA)
		}
		if lenB >>= 1; lenB == 0 {
			break
		}
		square(&odd, &even)
		if lenB&1 != 0 {
			crcA = gf2Times(&odd, crcA)
		}
		if lenB >>= 1; lenB == 0 {
			break
		}
	}
	return crcA ^ crcB
}

func gf2Times(mat *[32]uint32, vec uint32) uint32 {
	var sum uint32
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
	}
	return sum
}

// Tensor is one tensor of a layout.
type Tensor struct {
	Name  string
	DType string // SafeTensors' dtype names ("F32", "BF16", "F8_E4M3", …)
	Shape []int64
	Size  int64
}

// Dir is a model directory that a codec reads files from. Implementations
// refuse paths that would leave the directory (path_traversal) and links.
type Dir interface {
	// Open opens the file at a clean relative slash path.
	Open(path string) (ReadAtCloser, error)
	// Stat reports whether a file exists and its size.
	Stat(path string) (size int64, err error)
}

// LinkCounter is a Dir that can count the hard links of a file. A codec
// that resolves paths named inside a model (ONNX external data) refuses a
// file with more than one (path_traversal): the other name may be outside
// the model directory. Dirs without links (in-memory ones) need not
// implement it.
type LinkCounter interface {
	Links(path string) (int, error)
}

// ReadAtCloser is an open file of a Dir.
type ReadAtCloser interface {
	io.ReaderAt
	io.Closer
	Size() int64
}
