package formats

import (
	"slices"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// Checkout's one rule on options and losses lives here; each codec answers
// it through the interfaces below, and the restorer applies it:
//
//  1. CheckHonoured: an option the target never reads (Planner.Honours)
//     is schema_error, before anything is planned;
//  2. Losses: what the version holds beside its tensors (Holder) that the
//     target does not keep (Keeper) is lossy_conversion unless
//     --drop-non-tensors, and is then the checkout's "left out";
//  3. Settle: an option given that the plan did not act on (Planned.Used:
//     --dtype with nothing to cast, --drop-non-tensors with nothing to
//     drop) is schema_error, naming it.

// Option is a checkout option that shapes the files written, by its flag
// name. A codec lists those it honours (Planner.Honours); checkout refuses
// the others for that target.
type Option string

// The options. Tensors is not among them: it chooses what is written,
// whatever the target.
const (
	OptMaxShardSize    Option = "--max-shard-size"
	OptAlignment       Option = "--alignment"
	OptExternalData    Option = "--external-data"
	OptInlineData      Option = "--inline-data"
	OptSizeThreshold   Option = "--size-threshold"
	OptSplitMaxTensors Option = "--split-max-tensors"
	OptSplitMaxSize    Option = "--split-max-size"
	OptDType           Option = "--dtype"
	OptClamp           Option = "--clamp"
	OptExtract         Option = "--extract"
	OptDropNonTensors  Option = "--drop-non-tensors"
)

// WriteOptions are the user's checkout options that a planner sees.
type WriteOptions struct {
	// MaxShardSize, when > 0, re-shards the tensors into files of at most
	// this many bytes (a larger tensor gets a file of its own).
	MaxShardSize int64
	// Tensors, when non-empty, selects the tensors whose names match one of
	// these glob patterns (path.Match syntax); the restorer selects them.
	Tensors []string
	// Alignment, when > 0, is the data alignment of the written files (a
	// power of two; GGUF's general.alignment; ONNX: the tensors' offsets
	// in its external data file).
	Alignment int64
	// ExternalData (ONNX) names the one data file, beside the .onnx file,
	// that receives every initializer of at least SizeThreshold bytes;
	// InlineData writes every tensor inside the .onnx file instead.
	ExternalData string
	InlineData   bool
	// SizeThreshold (ONNX), when given: smaller initializers stay inside
	// the .onnx file (0: every tensor moves); nil means onnx's 1024 bytes.
	SizeThreshold *int64
	// SplitMaxTensors and SplitMaxSize, when > 0, split a GGUF model as
	// gguf-split does: at most that many tensors, or bytes of tensor data,
	// per file.
	SplitMaxTensors int
	SplitMaxSize    int64
	// DType, when set ("f16", "bf16", "f32"), casts every floating-point
	// tensor to that dtype; a value the dtype cannot hold is refused
	// (lossy_conversion) unless Clamp is set.
	DType string
	Clamp bool
	// DropNonTensors lets a checkout leave out what the version holds
	// beside its tensors and the target cannot keep (a checkpoint's other
	// values, GGUF key/values, an ONNX graph), which is otherwise
	// lossy_conversion (Losses); the restorer's result says what.
	DropNonTensors bool
	// Extract writes an MPK archive's validated tree (etc/, lib/, share/)
	// instead of the archive.
	Extract bool
	// Name is the model's name, the ref checked out ("" for a digest),
	// which a conversion names the model by where the format has a name
	// (GGUF's general.name, as llama.cpp's converter takes the model
	// directory's).
	Name string
}

// Set lists the options that o sets, in a fixed order.
func (o WriteOptions) Set() []Option {
	var out []Option
	for _, s := range []struct {
		opt Option
		set bool
	}{
		{OptMaxShardSize, o.MaxShardSize > 0}, {OptAlignment, o.Alignment > 0}, {OptExternalData, o.ExternalData != ""},
		{OptInlineData, o.InlineData}, {OptSizeThreshold, o.SizeThreshold != nil}, {OptSplitMaxTensors, o.SplitMaxTensors > 0},
		{OptSplitMaxSize, o.SplitMaxSize > 0}, {OptDType, o.DType != ""}, {OptClamp, o.Clamp}, {OptExtract, o.Extract},
		{OptDropNonTensors, o.DropNonTensors},
	} {
		if s.set {
			out = append(out, s.opt)
		}
	}
	return out
}

// Uses is the subset of opts that o sets: what a planner that reads them
// whenever they are given puts in Planned.Used.
func (o WriteOptions) Uses(opts ...Option) []Option {
	var out []Option
	for _, s := range o.Set() {
		if slices.Contains(opts, s) {
			out = append(out, s)
		}
	}
	return out
}

// Relayout reports whether o asks for another layout than the one added.
func (o WriteOptions) Relayout() bool { return len(o.Set()) > 0 || len(o.Tensors) > 0 }

// CheckHonoured refuses (schema_error) the options o sets that target (a
// Planner) does not honour, naming those it does.
func CheckHonoured(target Planner, o WriteOptions) error {
	honours := target.Honours()
	var bad []string
	for _, opt := range o.Set() {
		if !slices.Contains(honours, opt) {
			bad = append(bad, string(opt))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	takes := "no options"
	if len(honours) > 0 {
		takes = joinOptions(honours)
	}
	return errs.New(errs.SchemaError, "checkout", "%s %s not apply to --format %s, which takes %s",
		strings.Join(bad, ", "), map[bool]string{true: "does", false: "do"}[len(bad) == 1], target.Name(), takes)
}

func joinOptions(opts []Option) string {
	names := make([]string, len(opts))
	for i, h := range opts {
		names[i] = string(h)
	}
	return strings.Join(names, ", ")
}

// HeldKind is the kind of something a version holds beside its tensors,
// by who can keep it.
type HeldKind int

const (
	// HeldMeta: string key/values (SafeTensors __metadata__, GGUF
	// key/values), which a format with metadata keeps.
	HeldMeta HeldKind = iota + 1
	// HeldGraph: an ONNX graph and the values its protobuf holds, which
	// only ONNX keeps.
	HeldGraph
	// HeldValues: a checkpoint's pickled values that are not tensors (an
	// epoch, a config object), which no re-layout writes.
	HeldValues
)

// Held is one thing a version holds beside its tensors.
type Held struct {
	What string // for the user: "model.gguf: its 24 GGUF key/values (…)"
	Kind HeldKind
}

// Holder is a codec whose versions hold something beside their tensors.
// Holds lists it; it may leave out the kinds that keeps (the target's)
// says are kept, where listing them costs (GGUF's key/values).
type Holder interface {
	Codec
	Holds(m *objects.Manifest, keeps func(HeldKind) bool) ([]Held, error)
}

// Keeper is a planner whose files keep some kinds of what a version holds
// beside its tensors.
type Keeper interface {
	Keeps(HeldKind) bool
}

// KeepsMeta reports whether target keeps string key/values (Export.Meta).
func KeepsMeta(target Planner) bool {
	k, ok := target.(Keeper)
	return ok && k.Keeps(HeldMeta)
}

// Losses is what a checkout of m (of format source) into target leaves
// out: what m holds beside its tensors that target does not keep. Without
// --drop-non-tensors a loss is lossy_conversion, saying what and how to
// accept it.
func Losses(source Codec, target Planner, m *objects.Manifest, o WriteOptions) ([]string, error) {
	h, ok := source.(Holder)
	if !ok {
		return nil, nil
	}
	k, _ := target.(Keeper)
	keeps := func(kind HeldKind) bool { return k != nil && k.Keeps(kind) }
	held, err := h.Holds(m, keeps)
	if err != nil {
		return nil, err
	}
	var lost []string
	for _, x := range held {
		if !keeps(x.Kind) {
			lost = append(lost, x.What)
		}
	}
	if len(lost) > 0 && !o.DropNonTensors {
		return nil, errs.New(errs.LossyConversion, "checkout",
			"--format %s keeps the tensors but not what this version holds beside them: %s; pass --drop-non-tensors to write it without them",
			target.Name(), strings.Join(lost, "; "))
	}
	return lost, nil
}

// Settle refuses (schema_error) every option o sets that the plan did not
// act on: neither in planned.Used nor --drop-non-tensors with something
// left out (lost).
func Settle(target Planner, o WriteOptions, planned *Planned, lost []string) error {
	used := planned.Used
	if len(lost) > 0 {
		used = append(slices.Clip(used), OptDropNonTensors)
	}
	var idle []Option
	for _, opt := range o.Set() {
		if !slices.Contains(used, opt) {
			idle = append(idle, opt)
		}
	}
	if len(idle) == 0 {
		return nil
	}
	var why []string
	for _, opt := range idle {
		switch opt {
		case OptDType:
			why = append(why, "no tensor written is a floating-point tensor of another dtype that --dtype would cast")
		case OptClamp:
			why = append(why, "--clamp goes with a --dtype that casts")
		case OptDropNonTensors:
			why = append(why, "nothing would be dropped: --format "+target.Name()+" keeps all this version holds")
		}
	}
	msg := joinOptions(idle) + " would change nothing in this checkout"
	if len(why) > 0 {
		msg += " (" + strings.Join(why, "; ") + ")"
	}
	return errs.New(errs.SchemaError, "checkout", "%s into --format %s; leave %s out", msg, target.Name(),
		map[bool]string{true: "it", false: "them"}[len(idle) == 1])
}
