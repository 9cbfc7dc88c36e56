package ollama

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"

	"github.com/mstore/mstore/internal/formats/gguf"
	"github.com/mstore/mstore/internal/modeldir"
)

// fileTypes are ollama's names of llama.cpp's general.file_type values
// (fs/ggml/type.go, FileType.String); any other is "unknown".
var fileTypes = map[uint64]string{1: "F16", 2: "Q4_0", 3: "Q4_1", 4: "MXFP4", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
	10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M",
	18: "Q6_K", 21: "Q2_K_S", 32: "BF16"}

// details fills in c what `ollama create` records of the GGUF file p
// (server/create.go): its architecture as the family, its parameter count
// as ollama prints it, its file type by ollama's name. `ollama list` and
// /api/show print them; without them a model shows no family or size.
func details(c *config, p string) error {
	d, err := modeldir.Open(p)
	if err != nil {
		return err
	}
	l, err := gguf.Codec.Parse(d, d.Files)
	if err != nil {
		return err
	}
	kvs, err := gguf.DecodeKVs([]byte(l.Files[0].Meta[gguf.MetaKV]))
	if err != nil {
		return fmt.Errorf("ollama: %s: %w", filepath.Base(p), err)
	}
	c.ModelFamily, c.FileType = "unknown", "unknown" // ollama's defaults
	for _, kv := range kvs {
		v := kv.Value
		switch {
		case kv.Key == "general.architecture" && v.Type == gguf.TypeString && !v.Array && len(v.Strs) == 1:
			c.ModelFamily = v.Strs[0]
		case kv.Key == "general.file_type" && !v.Array && v.Len() == 1 && isUint(v.Type):
			if n, ok := fileTypes[v.Uint(0)]; ok {
				c.FileType = n
			}
		}
	}
	c.ModelFamilies = []string{c.ModelFamily}
	var n uint64
	for _, t := range l.Tensors {
		e := uint64(1)
		for _, s := range t.Shape {
			e *= uint64(s)
		}
		n += e
	}
	c.ModelType = humanNumber(n)
	return nil
}

func isUint(t gguf.ValueType) bool {
	return t == gguf.TypeUint8 || t == gguf.TypeUint16 || t == gguf.TypeUint32 || t == gguf.TypeUint64
}

// humanNumber is ollama's format.HumanNumber: 7B, 1.5B, 125M, 2.50M, 513K.
func humanNumber(n uint64) string {
	f := float64(n)
	switch {
	case n >= 1e9:
		if f/1e9 == math.Floor(f/1e9) {
			return fmt.Sprintf("%.0fB", f/1e9)
		}
		return fmt.Sprintf("%.1fB", f/1e9)
	case n >= 1e6:
		if f/1e6 == math.Floor(f/1e6) {
			return fmt.Sprintf("%.0fM", f/1e6)
		}
		return fmt.Sprintf("%.2fM", f/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.0fK", f/1e3)
	}
	return strconv.FormatUint(n, 10)
}
