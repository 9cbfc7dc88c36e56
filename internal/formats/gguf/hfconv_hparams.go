package gguf

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/mstore/mstore/internal/errs"
)

// config is the part of config.json the conversion reads; numbers stay
// json.Number so that integers are not rounded through float64.
type config struct {
	Architectures []string                   `json:"architectures"`
	NameOrPath    string                     `json:"_name_or_path"`
	Fields        map[string]json.RawMessage `json:"-"`
}

func parseConfig(b []byte) (*config, error) {
	var c config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, errs.Wrap(errs.SchemaError, "hfconv", err, "config.json does not parse")
	}
	if err := json.Unmarshal(b, &c.Fields); err != nil {
		return nil, errs.Wrap(errs.SchemaError, "hfconv", err, "config.json is not an object")
	}
	return &c, nil
}

// num returns config key k as a number, or ok false when it is absent or
// null.
func (c *config) num(k string) (json.Number, bool, error) {
	raw, ok := c.Fields[k]
	if !ok || string(raw) == "null" {
		return "", false, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return "", false, errs.New(errs.SchemaError, "hfconv", "config.json %q is %s, not a number", k, raw)
	}
	return n, true, nil
}

func (c *config) u32(k string) (uint32, bool, error) {
	n, ok, err := c.num(k)
	if !ok || err != nil {
		return 0, ok, err
	}
	v, err := strconv.ParseUint(n.String(), 10, 32)
	if err != nil {
		return 0, false, errs.New(errs.SchemaError, "hfconv", "config.json %q is %s, not an integer of 32 bits", k, n)
	}
	return uint32(v), true, nil
}

func (c *config) f32(k string) (float32, bool, error) {
	n, ok, err := c.num(k)
	if !ok || err != nil {
		return 0, ok, err
	}
	v, err := strconv.ParseFloat(n.String(), 32)
	if err != nil || math.IsInf(v, 0) {
		return 0, false, errs.New(errs.SchemaError, "hfconv", "config.json %q is %s, not a float32", k, n)
	}
	return float32(v), true, nil
}

func (c *config) str(k string) string {
	var s string
	if raw, ok := c.Fields[k]; ok {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// missingError is a hyper-parameter config.json lacks: the directory is
// not one llama.cpp could run (NewToGGUF says why and converts nothing).
type missingError struct{ hf, gguf string }

func (e missingError) Error() string {
	return "config.json has no \"" + e.hf + "\", which llama.cpp needs as " + e.gguf
}

// hparams are the numbers the tensors are checked and permuted with.
type hparams struct {
	layers, heads, headsKV, hidden uint32
	vocab                          uint32
	hasVocab                       bool
	ropeFreqs                      []float32 // llama3 rope scaling's factors
}

// hparamKVs is TextModel.set_gguf_parameters (and LlamaModel's additions)
// of convert_hf_to_gguf.py, in its order; general.file_type is added by
// the caller where the converter puts it.
func hparamKVs(arch string, c *config) ([]KV, hparams, error) {
	var kvs []KV
	var hp hparams
	p := arch + "."
	need := func(hfKey, key string, dst *uint32) error {
		v, ok, err := c.u32(hfKey)
		if err != nil {
			return err
		}
		if !ok {
			return missingError{hfKey, p + key}
		}
		*dst = v
		kvs = append(kvs, KV{Key: p + key, Value: Uint32Value(v)})
		return nil
	}
	var ctx, ffn uint32
	if err := need("num_hidden_layers", "block_count", &hp.layers); err != nil {
		return nil, hp, err
	}
	if err := need("max_position_embeddings", "context_length", &ctx); err != nil {
		return nil, hp, err
	}
	if err := need("hidden_size", "embedding_length", &hp.hidden); err != nil {
		return nil, hp, err
	}
	if err := need("intermediate_size", "feed_forward_length", &ffn); err != nil {
		return nil, hp, err
	}
	if err := need("num_attention_heads", "attention.head_count", &hp.heads); err != nil {
		return nil, hp, err
	}
	if hp.heads == 0 {
		return nil, hp, errs.New(errs.SchemaError, "hfconv", "config.json num_attention_heads is 0")
	}
	hp.headsKV = hp.heads
	if v, ok, err := c.u32("num_key_value_heads"); err != nil {
		return nil, hp, err
	} else if ok && v > 0 {
		hp.headsKV = v
	}
	kvs = append(kvs, KV{Key: p + "attention.head_count_kv", Value: Uint32Value(hp.headsKV)})
	if v, ok, err := c.f32("rope_theta"); err != nil {
		return nil, hp, err
	} else if ok {
		kvs = append(kvs, KV{Key: p + "rope.freq_base", Value: Float32Value(v)})
	}
	if v, ok, err := c.f32("rms_norm_eps"); err != nil {
		return nil, hp, err
	} else if ok {
		kvs = append(kvs, KV{Key: p + "attention.layer_norm_rms_epsilon", Value: Float32Value(v)})
	}
	// An explicit head_dim (Mistral-Nemo's differs from hidden/heads) is
	// the key and value length, as TextModel.set_gguf_parameters writes.
	if v, ok, err := c.u32("head_dim"); err != nil {
		return nil, hp, err
	} else if ok && v > 0 {
		kvs = append(kvs, KV{Key: p + "attention.key_length", Value: Uint32Value(v)},
			KV{Key: p + "attention.value_length", Value: Uint32Value(v)})
	}
	if v, ok, err := c.u32("vocab_size"); err != nil {
		return nil, hp, err
	} else if ok {
		if v > maxPieces {
			return nil, hp, errs.New(errs.SizeLimitExceeded, "hfconv", "config.json vocab_size %d is more than the %d tokens this build converts", v, maxPieces)
		}
		hp.vocab, hp.hasVocab = v, true
	}
	if arch == "llama" {
		if hp.hasVocab {
			kvs = append(kvs, KV{Key: p + "vocab_size", Value: Uint32Value(hp.vocab)})
		}
		dim := hp.hidden / hp.heads
		if v, ok, err := c.u32("head_dim"); err != nil {
			return nil, hp, err
		} else if ok && v > 0 {
			dim = v
		}
		kvs = append(kvs, KV{Key: p + "rope.dimension_count", Value: Uint32Value(dim)})
	}
	rope, freqs, err := ropeScalingKVs(arch, p, c, hp)
	if err != nil {
		return nil, hp, err
	}
	hp.ropeFreqs = freqs
	return append(kvs, rope...), hp, nil
}

// ropeScalingKVs: linear and yarn scaling as the converter writes them;
// llama3's (for llama and mistral, as LlamaModel converts it) writes no
// key/value but the rope_freqs tensor's factors (llama3RopeFreqs).
func ropeScalingKVs(arch, p string, c *config, hp hparams) ([]KV, []float32, error) {
	raw, ok := c.Fields["rope_scaling"]
	if !ok || string(raw) == "null" {
		return nil, nil, nil
	}
	var rs ropeScaling
	if err := json.Unmarshal(raw, &rs); err != nil {
		return nil, nil, errs.Wrap(errs.SchemaError, "hfconv", err, "config.json rope_scaling")
	}
	t := rs.RopeType
	if t == "" {
		t = rs.Type
	}
	f, _ := strconv.ParseFloat(rs.Factor.String(), 32)
	switch {
	case t == "" || t == "default":
		return nil, nil, nil
	case t == "linear" || t == "yarn":
		kvs := []KV{
			{Key: p + "rope.scaling.type", Value: StringValue(t)},
			{Key: p + "rope.scaling.factor", Value: Float32Value(float32(f))},
		}
		if o, err := strconv.ParseUint(rs.Orig.String(), 10, 32); t == "yarn" && err == nil {
			kvs = append(kvs, KV{Key: p + "rope.scaling.original_context_length", Value: Uint32Value(uint32(o))})
		}
		return kvs, nil, nil
	case strings.ToLower(rs.RopeType) == "llama3" && arch == "llama":
		freqs, err := llama3RopeFreqs(c, rs, hp)
		return nil, freqs, err
	}
	return nil, nil, errs.New(errs.UnsupportedVersion, "hfconv", "config.json rope_scaling type %q is not converted by this build for %s (it takes linear and yarn, and llama3 for llama and mistral); convert with llama.cpp's convert_hf_to_gguf.py", t, arch)
}

// kvMap indexes key/values by key.
type kvMap map[string]Value

func (m kvMap) u32(k string) (uint64, bool) {
	v, ok := m[k]
	if !ok || v.Array || v.Len() != 1 {
		return 0, false
	}
	switch v.Type {
	case TypeUint8, TypeUint16, TypeUint32, TypeUint64, TypeBool:
		return v.Uint(0), true
	case TypeInt8, TypeInt16, TypeInt32, TypeInt64:
		if n := v.Int(0); n >= 0 {
			return uint64(n), true
		}
	}
	return 0, false
}

func (m kvMap) f(k string) (float64, bool) {
	v, ok := m[k]
	if !ok || v.Array || v.Len() != 1 || v.Type != TypeFloat32 && v.Type != TypeFloat64 {
		return 0, false
	}
	return v.Float(0), true
}

func (m kvMap) str(k string) (string, bool) {
	v, ok := m[k]
	if !ok || v.Array || v.Type != TypeString {
		return "", false
	}
	return v.Strs[0], true
}

// orderedJSON writes an object with keys in the given order (Go maps
// would sort them; transformers' own files keep a readable order).
type orderedJSON struct {
	keys []string
	vals []any
}

func (o *orderedJSON) set(k string, v any) { o.keys, o.vals = append(o.keys, k), append(o.vals, v) }

func (o *orderedJSON) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		vb, err := marshalNoEscape(o.vals[i])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// indentJSON is v as indented JSON with a final newline, as HF writes.
func indentJSON(v any) ([]byte, error) {
	b, err := marshalNoEscape(v)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// float32JSON is a float32 written with the fewest digits that read back
// to it (1e-05, not 9.999999747378752e-06).
type float32JSON float32

func (f float32JSON) MarshalJSON() ([]byte, error) {
	return []byte(strconv.FormatFloat(float64(f), 'g', -1, 32)), nil
}
