package gguf

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/cast"
	"github.com/mstore/mstore/internal/objects"
)

// Honours: GGUF models are split as gguf-split does (--max-shard-size
// counts as --split-max-size), aligned and cast; what they cannot keep (an
// ONNX graph) is left out with --drop-non-tensors.
func (codec) Honours() []formats.Option {
	return []formats.Option{formats.OptMaxShardSize, formats.OptSplitMaxSize, formats.OptSplitMaxTensors,
		formats.OptAlignment, formats.OptDType, formats.OptClamp, formats.OptDropNonTensors}
}

// Keeps: a source's string key/values become GGUF key/values.
func (codec) Keeps(k formats.HeldKind) bool { return k == formats.HeldMeta }

// Holds: each model's key/values (in its file, or its split's first shard).
func (codec) Holds(m *objects.Manifest, keeps func(formats.HeldKind) bool) ([]formats.Held, error) {
	if keeps(formats.HeldMeta) {
		return nil, nil // decoding every key/value to describe them would cost for nothing
	}
	var out []formats.Held
	for _, f := range m.Files {
		if f.Role != objects.RoleContainer || f.Meta[MetaKV] == "" {
			continue
		}
		kvs, _, err := manifestKVs(f) // the keys: values kept in frames are not read
		if err != nil {
			return nil, errs.Wrap(errs.IntegrityError, "checkout", err, "%s: the manifest's key/values", f.Path)
		}
		kvs = withoutSplitKeys(kvs)
		if len(kvs) == 0 {
			continue
		}
		keys := make([]string, 0, 3)
		for _, kv := range kvs[:min(3, len(kvs))] {
			keys = append(keys, kv.Key)
		}
		out = append(out, formats.Held{Kind: formats.HeldMeta,
			What: fmt.Sprintf("%s: its %d GGUF key/values (%s, …: the tokenizer, chat template, hyper-parameters)", f.Path, len(kvs), strings.Join(keys, ", "))})
	}
	return out, nil
}

// Extensions are stripped from an added file's name for its ref name.
func (codec) Extensions() []string { return []string{".gguf"} }

// ggufModel is one GGUF model of a version: a file, or the shards of one
// split, with what its writer needs.
type ggufModel struct {
	name    string // the file name without ".gguf", or the split's prefix
	version uint32
	kvs     []KV // of the model (the first shard's), without split keys
	tensors []objects.Tensor
	hf      *hfGGUF // an HF llama-family directory converted for llama.cpp
	note    string  // why an HF directory is not converted
}

// PlanCheckout writes the selected tensors as GGUF: each model of a GGUF
// version as one file (merging a split one), or split again at
// --split-max-tensors / --split-max-size (--max-shard-size counts as
// --split-max-size); --alignment; --dtype. A version of another format
// becomes one model named after its container file, with, from a
// source that exports string metadata (SafeTensors), the key/values that __metadata__ "kv" keeps
// (a version converted from GGUF) and the other __metadata__ entries as
// string key/values ("general.*" as they are, others under
// "safetensors.metadata."). An HF llama/mistral/qwen2 directory is
// converted as llama.cpp's convert_hf_to_gguf.py does (hfToGGUF); 1-D F32
// tensors stay F32 under --dtype (keepNormsF32).
func (codec) PlanCheckout(req formats.PlanRequest) (*formats.Planned, error) {
	models, err := ggufModels(req)
	if err != nil {
		return nil, err
	}
	splitSize := req.Options.SplitMaxSize
	if splitSize == 0 {
		splitSize = req.Options.MaxShardSize
	} else if req.Options.MaxShardSize > 0 {
		return nil, errs.New(errs.SchemaError, "checkout", "--max-shard-size counts as --split-max-size for GGUF: give one of them")
	}
	casts := false
	out := &formats.Planned{Layout: &formats.Layout{Format: Codec.Name()}}
	written := map[string]string{}
	for _, m := range models {
		if err := checkGGUFTypes(m.tensors); err != nil {
			return nil, err
		}
		in, tr, err := cast.Tensors(m.tensors, req.Options)
		if err != nil {
			return nil, err
		}
		in, tr = keepNormsF32(m.tensors, in, tr)
		casts = casts || m.casts(tr)
		kvs := m.kvs
		if tr != nil {
			kvs = withFileType(kvs, in)
		}
		sources := m.tensors
		if m.hf != nil {
			sources, in, tr, kvs = m.hf.apply(m.tensors, in, tr, kvs)
		}
		l, err := Plan(in, PlanOptions{Name: m.name, Version: m.version, KVs: kvs, Alignment: req.Options.Alignment,
			SplitMaxTensors: req.Options.SplitMaxTensors, SplitMaxSize: splitSize})
		if err != nil {
			return nil, err
		}
		base := len(out.Layout.Tensors)
		for _, f := range l.Files {
			if other, dup := written[f.Path]; dup {
				return nil, errs.New(errs.Conflict, "checkout", "two GGUF models (%s and %s) would both be written as %s", other, m.name, f.Path)
			}
			written[f.Path] = m.name
			for i := range f.Extents {
				if f.Extents[i].Kind == formats.TensorData {
					f.Extents[i].Tensor += base
				}
			}
			out.Layout.Files = append(out.Layout.Files, f)
		}
		out.Layout.Tensors = append(out.Layout.Tensors, l.Tensors...)
		out.Sources = append(out.Sources, sources...)
		// Plain casts are made a chunk at a time; an HF conversion's are
		// composed with its reorders, and it may add tensors.
		byChunk := make([]bool, len(in))
		if m.hf == nil {
			copy(byChunk, cast.ByChunk(tr))
		}
		if tr == nil {
			tr = make([]formats.Transform, len(in))
		}
		out.Transforms = append(out.Transforms, tr...)
		out.ByChunk = append(out.ByChunk, byChunk...)
	}
	sort.Slice(out.Layout.Files, func(i, j int) bool { return out.Layout.Files[i].Path < out.Layout.Files[j].Path })
	if len(models) == 1 {
		out.Note = models[0].note
	}
	o := req.Options
	out.Used = o.Uses(formats.OptMaxShardSize, formats.OptSplitMaxSize, formats.OptSplitMaxTensors, formats.OptAlignment)
	if casts {
		out.Used = append(out.Used, o.Uses(formats.OptDType, formats.OptClamp)...)
	}
	return out, nil
}

// casts reports whether --dtype's casts tr change a tensor of m that is
// written cast: not the 1-D ones an HF conversion widens to F32.
func (m *ggufModel) casts(tr []formats.Transform) bool {
	for i, t := range tr {
		if t != nil && (m.hf == nil || !m.hf.plans[m.tensors[i].Name].F32) {
			return true
		}
	}
	return false
}

// checkGGUFTypes refuses tensors whose dtype GGUF does not have.
func checkGGUFTypes(tensors []objects.Tensor) error {
	var bad []objects.Tensor
	for _, t := range tensors {
		if _, ok := TypeByName(t.DType); !ok {
			bad = append(bad, t)
		}
	}
	if len(bad) > 0 {
		return errs.New(errs.UnsupportedVersion, "checkout",
			"GGUF has no type for %d tensors: %s (GGUF takes F32, F16, BF16, F64, I8, I16, I32, I64 and ggml's quantized types; leave them out with --tensors)",
			len(bad), formats.DescribeDTypes(bad))
	}
	return nil
}

// withFileType updates general.file_type after a --dtype cast that left
// every tensor of two or more dimensions in one float dtype (llama_ftype
// ALL_F32, MOSTLY_F16, MOSTLY_BF16), keeping the key's type; otherwise the
// key stays. 1-D tensors stay F32 (keepNormsF32) and do not count.
func withFileType(kvs []KV, tensors []formats.Tensor) []KV {
	ftypes := map[string]uint64{"F32": 0, "F16": 1, "BF16": 32}
	var ftype uint64
	n := 0
	for _, t := range tensors {
		if len(t.Shape) <= 1 {
			continue
		}
		f, ok := ftypes[t.DType]
		if !ok || n > 0 && f != ftype {
			return kvs
		}
		ftype, n = f, n+1
	}
	if n == 0 {
		return kvs
	}
	out := append([]KV(nil), kvs...)
	for i, kv := range out {
		if kv.Key == KeyFileType && !kv.Value.Array && kv.Value.Type == TypeUint32 {
			out[i].Value = Uint32Value(uint32(ftype))
		}
	}
	return out
}

// ggufModels groups the selected tensors into the models to write.
func ggufModels(req formats.PlanRequest) ([]*ggufModel, error) {
	if req.Source.Format != Codec.Name() {
		m, err := convertedModel(req)
		if err != nil {
			return nil, err
		}
		return []*ggufModel{m}, nil
	}
	var models []*ggufModel
	byKey := map[string]*ggufModel{}
	modelOf := map[string]*ggufModel{} // tensor name → model
	for _, f := range req.Source.Files {
		if f.Role != objects.RoleContainer {
			continue
		}
		kvs, err := resolvedKVs(f, req.Frames)
		if err != nil {
			return nil, errs.Wrap(errs.IntegrityError, "checkout", err, "%s: the manifest's key/values", f.Path)
		}
		// Shards come in path order, the first (with the key/values) first.
		key, name := "file:"+f.Path, strings.TrimSuffix(f.Path, path.Ext(f.Path))
		if prefix, _, n, shard := ShardOf(f.Path); shard && (n > 1 || hasSplitKeys(kvs)) {
			key, name = "split:"+prefix, prefix
		}
		m := byKey[key]
		if m == nil {
			v, err := strconv.ParseUint(f.Meta[MetaVersion], 10, 32)
			if err != nil {
				return nil, errs.New(errs.IntegrityError, "checkout", "%s: the manifest has no GGUF version", f.Path)
			}
			m = &ggufModel{name: name, version: uint32(v), kvs: withoutSplitKeys(kvs)}
			byKey[key] = m
			models = append(models, m)
		}
		for _, e := range f.Extents {
			if e.Kind == objects.ExtentTensor {
				modelOf[req.Source.Tensors[e.Tensor].Name] = m
			}
		}
	}
	for _, t := range req.Tensors {
		m := modelOf[t.Name]
		if m == nil {
			return nil, errs.New(errs.IntegrityError, "checkout", "tensor %q is in no GGUF file of the manifest", t.Name)
		}
		m.tensors = append(m.tensors, t)
	}
	// A model without tensors (a vocabulary) is written again unless
	// --tensors picks some tensors.
	var out []*ggufModel
	for _, m := range models {
		if len(m.tensors) > 0 || len(req.Options.Tensors) == 0 {
			out = append(out, m)
		}
	}
	return out, nil
}

func hasSplitKeys(kvs []KV) bool {
	for _, kv := range kvs {
		if IsSplitKey(kv.Key) {
			return true
		}
	}
	return false
}

func withoutSplitKeys(kvs []KV) []KV {
	out := kvs[:0:0]
	for _, kv := range kvs {
		if !IsSplitKey(kv.Key) {
			out = append(out, kv)
		}
	}
	return out
}

// Keys of a SafeTensors file's __metadata__ that carry GGUF's own data.
const (
	stMetaKV      = MetaKV      // the key/values, EncodeKVs JSON
	stMetaVersion = MetaVersion // the GGUF version
	stMetaPrefix  = "safetensors.metadata."
)

// containerSuffix matches what follows a model's name in a container file
// name: "-00001-of-00003.safetensors", ".onnx", ".bin".
var containerSuffix = regexp.MustCompile(`(-\d{5}-of-\d{5})?\.[A-Za-z0-9]+$`)

// convertedModel is the one GGUF model of a version of another format.
func convertedModel(req formats.PlanRequest) (*ggufModel, error) {
	m := &ggufModel{name: DefaultName, version: 3, tensors: req.Tensors}
	var first *objects.File
	for i, f := range req.Source.Files {
		if f.Role == objects.RoleContainer {
			first = &req.Source.Files[i]
			break
		}
	}
	if first == nil {
		return m, nil
	}
	if name := containerSuffix.ReplaceAllString(first.Path, ""); name != "" && name != first.Path {
		m.name = name
	}
	if req.From == nil || req.From.Meta == nil {
		return m, hfToGGUF(req, m, first.Path) // e.g. pytorch_model.bin
	}
	meta := req.From.Meta
	if s, ok := meta[stMetaKV]; ok {
		kvs, err := DecodeKVs([]byte(s))
		if err != nil {
			return nil, errs.Wrap(errs.SchemaError, "checkout", err, "%s: __metadata__ %q", first.Path, stMetaKV)
		}
		m.kvs = withoutSplitKeys(kvs)
	}
	if s, ok := meta[stMetaVersion]; ok {
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil || v < 2 || v > 3 {
			return nil, errs.New(errs.SchemaError, "checkout", "%s: __metadata__ %q is %q, not 2 or 3", first.Path, stMetaVersion, s)
		}
		m.version = uint32(v)
	}
	have := map[string]bool{}
	for _, kv := range m.kvs {
		have[kv.Key] = true
	}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		// GGUF's own entries, and keys the writer sets itself.
		if k == stMetaKV || k == stMetaVersion || k == MetaAlignment || k == KeyAlignment || IsSplitKey(k) {
			continue
		}
		key := k
		if !strings.HasPrefix(k, "general.") {
			key = stMetaPrefix + k
		}
		if !have[key] {
			m.kvs = append(m.kvs, KV{Key: key, Value: StringValue(meta[k])})
		}
	}
	if err := hfToGGUF(req, m, first.Path); err != nil {
		return nil, err
	}
	return m, nil
}

// Export is what a checkout of a GGUF version into another format
// carries: into a target with metadata (SafeTensors), the model's name and
// its key/values and version as string metadata (so that a checkout back
// to GGUF restores them exactly); into one without (PyTorch), nothing
// (Holds says the key/values are lost). Quantized tensors are refused
// (lossy_conversion), as is a selection that spans several GGUF models,
// whose key/values one file cannot keep apart. Into SafeTensors, a
// llama-family model also converts to a Hugging Face directory
// (hfConversion, Export.Convert).
func (codec) Export(req formats.PlanRequest, target string, keepsMeta bool) (*formats.Export, error) {
	var quantized []objects.Tensor
	for _, t := range req.Tensors {
		if IsQuantized(t.DType) {
			quantized = append(quantized, t)
		}
	}
	if len(quantized) > 0 {
		return nil, errs.New(errs.LossyConversion, "checkout",
			"%s has no quantized ggml types, %d tensors would be lost: %s (keep --format gguf, or leave them out with --tensors)",
			target, len(quantized), formats.DescribeDTypes(quantized))
	}
	if !keepsMeta {
		return &formats.Export{}, nil // the key/values are lost (Holds)
	}
	models, err := ggufModels(req)
	if err != nil {
		return nil, err
	}
	if len(models) > 1 {
		return nil, errs.New(errs.LossyConversion, "checkout",
			"the version holds %d GGUF models (%s, %s, …) whose key/values one %s file cannot keep apart; convert one model at a time with --tensors",
			len(models), models[0].name, models[1].name, target)
	}
	m := models[0]
	var conv *formats.Conversion
	if target == hfTarget {
		if conv, err = hfConversion(req, m); err != nil {
			return nil, err
		}
	}
	meta := map[string]string{
		stMetaKV:      string(EncodeKVs(m.kvs)),
		stMetaVersion: strconv.FormatUint(uint64(m.version), 10),
	}
	// __metadata__ entries that a conversion from SafeTensors carried come
	// back as they were.
	for _, kv := range m.kvs {
		if k, ok := strings.CutPrefix(kv.Key, stMetaPrefix); ok && k != "" && !kv.Value.Array && kv.Value.Type == TypeString {
			if _, taken := meta[k]; !taken {
				meta[k] = kv.Value.Strs[0]
			}
		}
	}
	out := &formats.Export{Name: m.name, Meta: meta, Convert: conv}
	if conv != nil {
		out.Name = "model" // as transformers names an HF directory's weights
	}
	return out, nil
}

// hfTarget is the format of a Hugging Face directory's weights, into
// which a GGUF llama-family model converts (hfConversion).
const hfTarget = "safetensors"
