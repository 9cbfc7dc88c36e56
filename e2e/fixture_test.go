package e2e

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// tensor is one tensor of a generated SafeTensors file.
type tensor struct {
	name  string
	dtype string
	shape []int64
	data  []byte
}

var dtypeBytes = map[string]int64{"F64": 8, "I64": 8, "F32": 4, "I32": 4, "F16": 2, "BF16": 2, "U8": 1, "I8": 1, "BOOL": 1}

// randBytes returns n deterministic pseudo-random bytes for seed.
func randBytes(seed uint64, n int64) []byte {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	copy(key[8:], "mstore e2e fixture bytes")
	b := make([]byte, n)
	rand.NewChaCha8(key).Read(b)
	return b
}

// randTensor is a tensor of dtype and shape filled with bytes from seed.
func randTensor(name, dtype string, seed uint64, shape ...int64) tensor {
	n, ok := dtypeBytes[dtype]
	if !ok {
		panic("test bug: no size for dtype " + dtype)
	}
	for _, d := range shape {
		n *= d
	}
	return tensor{name: name, dtype: dtype, shape: shape, data: randBytes(seed, n)}
}

func (t tensor) size() int64 { return int64(len(t.data)) }

// safetensorsFile encodes tensors as a SafeTensors file: the data in the
// given order, the header's keys sorted by name (as the reference writer
// does), padded with spaces to a multiple of 8 bytes.
func safetensorsFile(tensors []tensor, meta map[string]string) []byte {
	offsets := map[string][2]int64{}
	var off int64
	for _, t := range tensors {
		offsets[t.name] = [2]int64{off, off + t.size()}
		off += t.size()
	}
	sorted := append([]tensor{}, tensors...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	var parts []string
	if len(meta) > 0 {
		b, _ := json.Marshal(meta)
		parts = append(parts, `"__metadata__":`+string(b))
	}
	for _, t := range sorted {
		parts = append(parts, fmt.Sprintf(`%s:{"dtype":%q,"shape":%s,"data_offsets":[%d,%d]}`,
			quote(t.name), t.dtype, shapeJSON(t.shape), offsets[t.name][0], offsets[t.name][1]))
	}
	hdr := "{" + strings.Join(parts, ",") + "}"
	for len(hdr)%8 != 0 {
		hdr += " "
	}
	out := rawSafetensors(hdr, nil)
	for _, t := range tensors {
		out = append(out, t.data...)
	}
	return out
}

// rawSafetensors is a length prefix, the header text as given and data.
func rawSafetensors(header string, data []byte) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	out = append(out, header...)
	return append(out, data...)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func shapeJSON(shape []int64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// headerSize is 8 + the header length of a SafeTensors file: its frame.
func headerSize(t *testing.T, file []byte) int64 {
	t.Helper()
	if len(file) < 8 {
		t.Fatalf("SafeTensors file of %d bytes", len(file))
	}
	return 8 + int64(binary.LittleEndian.Uint64(file))
}

// parsedTensor is one tensor read back from a SafeTensors file.
type parsedTensor struct {
	DType       string  `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets [2]int64
	data        []byte
}

// readSafetensors parses a SafeTensors file just enough to compare what it
// holds: tensor names, dtypes, shapes and bytes.
func readSafetensors(t *testing.T, path string) map[string]parsedTensor {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	frame := headerSize(t, b)
	if frame > int64(len(b)) {
		t.Fatalf("%s: header passes the end of the file", path)
	}
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(b[8:frame], &hdr); err != nil {
		t.Fatalf("%s: header: %v", path, err)
	}
	out := map[string]parsedTensor{}
	for name, raw := range hdr {
		if name == "__metadata__" {
			continue
		}
		var e struct {
			DType       string   `json:"dtype"`
			Shape       []int64  `json:"shape"`
			DataOffsets [2]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("%s: tensor %q: %v", path, name, err)
		}
		begin, end := frame+e.DataOffsets[0], frame+e.DataOffsets[1]
		if begin > end || end > int64(len(b)) {
			t.Fatalf("%s: tensor %q: data_offsets %v out of the file", path, name, e.DataOffsets)
		}
		out[name] = parsedTensor{DType: e.DType, Shape: e.Shape, DataOffsets: e.DataOffsets, data: b[begin:end]}
	}
	return out
}

// readMetadata returns the __metadata__ of a SafeTensors file, nil if none.
func readMetadata(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	frame := headerSize(t, b)
	if frame > int64(len(b)) {
		t.Fatalf("%s: header passes the end of the file", path)
	}
	var hdr struct {
		Meta map[string]string `json:"__metadata__"`
	}
	if err := json.Unmarshal(b[8:frame], &hdr); err != nil {
		t.Fatalf("%s: header: %v", path, err)
	}
	return hdr.Meta
}

// writeFiles writes files (relative slash path → bytes) under dir.
func writeFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for p, b := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// writeFile writes one file and returns its path.
func writeFile(t *testing.T, path string, b []byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// smallModel is a few small tensors of mixed dtypes; seed picks the bytes.
func smallModel(seed uint64) []tensor {
	ts := []tensor{randTensor("model.embed_tokens.weight", "F32", seed, 64, 128)}
	for i := range 3 {
		s := seed*100 + uint64(i)*10
		ts = append(ts,
			randTensor(fmt.Sprintf("model.layers.%d.self_attn.q_proj.weight", i), "F32", s+1, 128, 128),
			randTensor(fmt.Sprintf("model.layers.%d.mlp.up_proj.weight", i), "F16", s+2, 256, 128),
		)
	}
	return append(ts, randTensor("model.norm.weight", "F32", seed+7, 128))
}

// configJSON is a Hugging Face style config.json.
func configJSON(torchDType string, extra ...string) []byte {
	fields := []string{`"architectures": ["LlamaForCausalLM"]`, `"hidden_size": 128`, `"num_hidden_layers": 3`}
	if torchDType != "" {
		fields = append(fields, fmt.Sprintf(`"torch_dtype": %q`, torchDType))
	}
	fields = append(fields, extra...)
	return []byte("{\n  " + strings.Join(fields, ",\n  ") + "\n}\n")
}

// tokenizerJSON is a small stand-in for tokenizer.json.
func tokenizerJSON() []byte {
	var vocab []string
	for i := range 200 {
		vocab = append(vocab, fmt.Sprintf("%q: %d", fmt.Sprintf("tok%03d", i), i))
	}
	return []byte(`{"version": "1.0", "model": {"type": "BPE", "vocab": {` + strings.Join(vocab, ", ") + "}}}\n")
}

// shardedModel splits tensors into n HF-style shards with their index, and
// adds config.json and tokenizer.json. It returns the files by path.
func shardedModel(tensors []tensor, n int) map[string][]byte {
	files := map[string][]byte{
		"config.json":    configJSON("float32"),
		"tokenizer.json": tokenizerJSON(),
	}
	weightMap := map[string]string{}
	var total int64
	per := (len(tensors) + n - 1) / n
	for k := range n {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", k+1, n)
		members := tensors[k*per : min((k+1)*per, len(tensors))]
		files[name] = safetensorsFile(members, map[string]string{"format": "pt"})
		for _, t := range members {
			weightMap[t.name] = name
			total += t.size()
		}
	}
	files["model.safetensors.index.json"] = indexJSON(total, weightMap)
	return files
}

// indexJSON is a model.safetensors.index.json as transformers writes it.
func indexJSON(total int64, weightMap map[string]string) []byte {
	b, err := json.MarshalIndent(map[string]any{
		"metadata":   map[string]any{"total_size": total},
		"weight_map": weightMap,
	}, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

// layerTensors is 2·layers tensors of F32 [64,64] (16 KiB each).
func layerTensors(seed uint64, layers int) []tensor {
	var ts []tensor
	for i := range layers {
		ts = append(ts,
			randTensor(fmt.Sprintf("model.layers.%d.self_attn.q_proj.weight", i), "F32", seed+uint64(2*i), 64, 64),
			randTensor(fmt.Sprintf("model.layers.%d.mlp.down_proj.weight", i), "F32", seed+uint64(2*i+1), 64, 64),
		)
	}
	return ts
}
