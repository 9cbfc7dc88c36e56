package gguf

import (
	"bytes"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
)

func TestRealFilesParse(t *testing.T) {
	for name, b := range realFiles(t) {
		t.Run(name, func(t *testing.T) {
			files := map[string][]byte{name: b}
			start := time.Now()
			l, err := parseFiles(files)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("parsed in %v: %d tensors, %d extents", time.Since(start), len(l.Tensors), len(l.Files[0].Extents))
			if err := formattest.CheckLayout(l, files); err != nil {
				t.Fatal(err)
			}
			kvs, err := DecodeKVs([]byte(l.Files[0].Meta[MetaKV]))
			if err != nil {
				t.Fatal(err)
			}
			if again := EncodeKVs(kvs); !bytes.Equal(again, []byte(l.Files[0].Meta[MetaKV])) {
				t.Fatal("key/values do not encode back to the same JSON")
			}
			if len(l.Tensors) == 0 {
				// llama.cpp's vocabulary files stop right after the tensor
				// infos: frames only, the tokenizer's arrays each its own.
				var big int
				for _, e := range l.Files[0].Extents {
					if e.Kind != formats.Frame {
						t.Fatalf("extents %+v, want frames only", l.Files[0].Extents)
					}
					if e.Size >= KVFrameMin {
						big++
						if _, err := parseKVFrame(b[e.Offset:e.Offset+e.Size], name); err != nil {
							t.Fatalf("frame at %d: %v", e.Offset, err)
						}
					}
				}
				if big < 2 {
					t.Fatalf("%d frames of key/values of their own, want the tokenizer's arrays", big)
				}
			}
		})
	}
}
