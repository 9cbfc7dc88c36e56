package formats

import (
	"fmt"
	"io"
	"strings"

	"github.com/mstore/mstore/internal/objects"
)

// The optional interfaces below are what a codec does beyond Parse. The
// program reaches a format's behaviour only through them, at the one typed
// registry (internal/codecs), whose test checks that every codec
// implements what it claims.

// Transform computes a written tensor's bytes from the stored bytes of its
// source tensor: a dtype cast, a strided view made contiguous. It must be
// deterministic and must refuse (lossy_conversion) what it cannot represent.
type Transform func(src []byte) ([]byte, error)

// PlanRequest is what a planner gets: the version being checked out, the
// tensors to write (in manifest order, expanded by the source's Expander)
// and the user's options.
type PlanRequest struct {
	Source  *objects.Manifest
	Tensors []objects.Tensor
	Options WriteOptions
	// From is what the source format carries into this one (its Exporter's
	// answer) when the source is of another format; nil otherwise.
	From *Export
	// Frames returns the bytes of the frame extents of Source's file at
	// path, one entry per extent (zeros for zero extents, nil for tensor
	// extents), each blob verified: for planners that rewrite a
	// container's frame (ONNX's protobuf). More than limit bytes of frames
	// is size_limit_exceeded.
	Frames func(path string, limit int64) ([][]byte, error)
}

// Planned is a planner's answer: the layout to write, with no I/O done.
// Frame extents carry their bytes, tensor extents index Layout.Tensors.
type Planned struct {
	Layout *Layout
	// Sources[i] is the stored tensor whose bytes fill Layout.Tensors[i]. A
	// nil Sources means Layout.Tensors[i] is req.Tensors[i], byte for byte.
	Sources []objects.Tensor
	// Transforms[i], when non-nil, makes tensor i's bytes from its source's
	// (then Layout.Tensors[i] may have another dtype, shape or size).
	Transforms []Transform
	// ByChunk[i] says Transforms[i] maps each element of its source on
	// its own (a cast, cast.ByChunk): the restorer may apply it to the
	// source a chunk at a time (objects.ChunkSize holds whole elements of
	// every dtype it casts), so that a large tensor is never held whole.
	// A transform composed with another (a reorder) is not.
	ByChunk []bool
	// Tree says the layout is a plain tree of files that no codec reads
	// back (an extracted MPK archive): each file must be exactly one
	// untransformed tensor, and is checked against that tensor's digest as
	// it is written rather than parsed again.
	Tree bool
	// Extra are whole files written beside the layout's (path → bytes),
	// such as the config.json of a GGUF model converted to Hugging Face's
	// layout; each replaces the version's own file of that path.
	Extra map[string][]byte
	// Note is a remark for the user (the checkout's note), such as why
	// the files written will not run in the format's usual runtime.
	Note string
	// Used are the options the plan acted on (Uses). Settle refuses
	// every option given that is not among them.
	Used []Option
}

// Planner is a codec that checkout can write: the versions of its own
// format laid out again, and versions of other formats converted.
type Planner interface {
	Codec
	// Honours lists the layout options the planner reads.
	Honours() []Option
	// PlanCheckout lays req.Tensors out as this format's files, or
	// refuses what it cannot write (lossy_conversion for what would be
	// lost, unsupported_version for sources it cannot convert).
	PlanCheckout(req PlanRequest) (*Planned, error)
}

// Export is what a version carries into a checkout of another format
// beside its tensors.
type Export struct {
	// Name is the model's name for the target's files ("" for the
	// target's default).
	Name string
	// Meta are string key/values a target with metadata keeps (SafeTensors
	// __metadata__, GGUF key/values), so that a checkout back restores them.
	Meta map[string]string
	// Convert, when set, is the source's conversion into the target's
	// conventions (a GGUF llama-family model into a Hugging Face
	// directory), which the target applies to the tensors it writes.
	Convert *Conversion
}

// Conversion renames and reorders a version's tensors for a target format
// and adds the files that the target's users expect beside its containers
// (Hugging Face's tensor names, config.json and tokenizer files).
type Conversion struct {
	// Names[i] is the target's name of PlanRequest.Tensors[i].
	Names []string
	// Reorders[i], when non-nil, rearranges tensor i's bytes after the
	// target's own --dtype cast (a permutation of rows, which commutes
	// with an element-wise cast).
	Reorders []Transform
	// Files are written beside the target's container files (Planned.Extra).
	Files map[string][]byte
}

// Exporter is a codec whose versions say what a checkout into another
// format carries (Export) or refuse what it would lose
// (lossy_conversion). keepsMeta says whether the target keeps Meta.
type Exporter interface {
	Codec
	Export(req PlanRequest, target string, keepsMeta bool) (*Export, error)
}

// Expanded is a tensor of a version as its users see it. Most are stored
// as they are; a format whose containers store something else (PyTorch:
// one storage shared by several tensors, strided views of a storage) says
// which stored tensor holds the bytes and how to read them out.
type Expanded struct {
	// Tensor is the tensor as users see it. When From is set, its Digest
	// and Chunks are unknown (zero) until it is written.
	Tensor objects.Tensor
	// From, when set, is the stored tensor whose bytes Read turns into
	// Tensor's.
	From *objects.Tensor
	Read Transform
}

// Expander is a codec whose versions' tensors, as users see them, are not
// the stored ones: Expand lists them in the order a re-layout writes them.
// Values that are not tensors are left out (the codec's Holder says so,
// and Losses decides).
type Expander interface {
	Codec
	Expand(m *objects.Manifest, opts WriteOptions) ([]Expanded, error)
}

// Encoder is a codec whose stored files may be written in an encoding
// (File.Meta[MetaCompression]); Encoding returns the canonical writer of
// that encoding.
type Encoder interface {
	Codec
	Encoding(name string) (func(io.Writer) io.WriteCloser, bool)
}

// Describer is a codec that says more about its versions than the
// generic listing of files and tensors (GGUF key/values, MPK stages).
type Describer interface {
	Codec
	Describe(m *objects.Manifest) (*Details, error)
}

// Differ is a codec that compares what its versions keep beside their
// tensors (GGUF key/values, PyTorch views). Both are of its format. A nil
// answer means nothing to say.
type Differ interface {
	Codec
	Diff(a, b *objects.Manifest) (*Details, error)
}

// Named is a codec that gives an add's default ref name: Extensions are
// the file name endings it strips ("model.safetensors" → "model").
type Named interface {
	Codec
	Extensions() []string
}

// DescribeDTypes lists tensors and their dtypes for a message, at most 8.
func DescribeDTypes(ts []objects.Tensor) string {
	var parts []string
	for i, t := range ts {
		if i == 8 {
			parts = append(parts, fmt.Sprintf("and %d more", len(ts)-8))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", t.Name, t.DType))
	}
	return strings.Join(parts, ", ")
}
