package formats

import (
	"io"

	"github.com/mstore/mstore/internal/errs"
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
	// CRC32Checks are the runs of the file whose CRC-32 the container
	// states and the codec left unread, because its Dir checks them
	// (CRC32Deferrer); in file order, apart. Empty from any other Dir.
	CRC32Checks []CRC32Check
}

// CRC32Check is a run of a file's bytes whose CRC-32 (IEEE) the container
// states: a zip member's data. A codec reads such a run only to compare
// its CRC-32; given a CRC32Deferrer, it lists the run instead, and the
// caller compares the CRC-32 of the bytes it reads anyway (an add, of the
// bytes it stores, as it hashes them).
type CRC32Check struct {
	Offset, Size int64
	Want         uint32
	Member       string // the zip member's name, for the refusal
}

// Mismatch is the refusal of a file whose run c has another CRC-32: the
// codec's (format's) own, whoever compares.
func (c CRC32Check) Mismatch(format, path string) error {
	return errs.At(errs.InvalidArchive, format, path, c.Offset, "member %q: CRC-32 mismatch (the data is corrupt)", c.Member)
}

// CRC32Deferrer is a Dir whose caller compares the CRC-32 of the runs a
// codec lists in File.CRC32Checks, which the codec then does not read.
type CRC32Deferrer interface {
	DefersCRC32() bool
}

// DefersCRC32 reports whether dir's caller compares the CRC-32s a codec
// lists (CRC32Deferrer); else the codec compares them itself.
func DefersCRC32(dir Dir) bool {
	d, ok := dir.(CRC32Deferrer)
	return ok && d.DefersCRC32()
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
// the little-endian CRC-32 of Layout.Tensors[Tensor], or of a prefix whose
// CRC-32 is PrefixCRC followed by the tensor's Size bytes (a zip member
// whose data is a header and then the tensor: an .npy in an .npz). Fill it
// with Value. A slot is 24 bytes: an .npz of 100,000 arrays has 200,000
// (one that held its prefix took 48).
type CRC32Slot struct {
	At        int
	Tensor    int32
	PrefixCRC uint32 // 0 when there is no prefix
	Size      int64  // the tensor's size, with a prefix
}

// Value is the slot's CRC-32, given the CRC-32 of the tensor's bytes. (A
// prefix whose CRC-32 is 0 changes nothing: combined with it, a CRC-32
// is itself.)
func (s CRC32Slot) Value(tensorCRC uint32) uint32 {
	if s.PrefixCRC == 0 {
		return tensorCRC
	}
	return CRC32Combine(s.PrefixCRC, tensorCRC, s.Size)
}

// CRC32Combine is the CRC-32 (IEEE) of A followed by B, from the CRC-32s
// of A and of B and B's length, as zlib 1.2.12's crc32_combine computes
// it: crcA times x^(8·lenB) modulo the polynomial, plus crcB, the power
// taken from a table of x^(2^k) (crc32Powers) with one multiplication per
// bit of lenB. zlib's older way, squaring a 32×32 operator matrix for
// each bit, took 28 µs a call: 2.9 of the 6.5 s of CPU of a checkout of
// 100,000 small tensors into a .npz, which combines a CRC per member.
func CRC32Combine(crcA, crcB uint32, lenB int64) uint32 {
	if lenB <= 0 {
		return crcA
	}
	// x^(8·lenB) = x^(lenB·2^3): start at the table's x^8.
	power, k := uint32(1)<<31, 3 // x^0
	for n := lenB; n != 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			power = crc32Times(crc32Powers[k%32], power)
		}
	}
	return crc32Times(power, crcA) ^ crcB
}

// crc32Poly is the CRC-32 (IEEE) polynomial, bit-reversed: in this
// representation bit 31 is x^0 and bit 0 is x^31.
const crc32Poly = 0xedb88320

// crc32Times is a times b modulo the polynomial (zlib's multmodp).
func crc32Times(a, b uint32) uint32 {
	var product uint32
	for m := uint32(1) << 31; m != 0 && a != 0; m >>= 1 {
		if a&m != 0 {
			product ^= b
			a ^= m
		}
		if b&1 != 0 {
			b = b>>1 ^ crc32Poly
		} else {
			b >>= 1
		}
	}
	return product
}

// crc32Powers[k] is x^(2^k) modulo the polynomial. x^(2^32) is x^(2^0)
// again (the multiplicative group has order 2^32-1), so 32 cover every
// power of two.
var crc32Powers = func() (t [32]uint32) {
	t[0] = 1 << 30 // x^1
	for k := 1; k < 32; k++ {
		t[k] = crc32Times(t[k-1], t[k-1])
	}
	return t
}()

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
