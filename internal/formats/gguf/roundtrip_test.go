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
				// llama.cpp's vocabulary files stop right after the tensor infos.
				if len(l.Files[0].Extents) != 1 || l.Files[0].Extents[0].Kind != formats.Frame {
					t.Fatalf("extents %+v, want one frame", l.Files[0].Extents)
				}
			}
		})
	}
}
