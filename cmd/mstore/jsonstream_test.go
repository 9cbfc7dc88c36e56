package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/objects"
)

// hostile are strings that encoding/json escapes or passes through: quotes,
// backslashes, control bytes, HTML, punctuation that is JSON's own, and
// text that is not ASCII.
var hostile = []string{"", `a"b`, `c\d`, "e\nf\tg\x01", "<h>&i", "{j:[k,]}", "ŝ€ 𝄞", `\"`, `"\\"`}

// The indenter gives json.Indent's bytes for any document, however its
// compact encoding is cut into writes (inside strings and escapes too).
func TestIndenterIsJSONIndent(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var value func(depth int) any
	value = func(depth int) any {
		switch k := rng.IntN(7); {
		case depth > 3 || k == 0:
			return hostile[rng.IntN(len(hostile))]
		case k == 1:
			return rng.Int64() - rng.Int64()
		case k == 2:
			return []any{}
		case k == 3:
			return map[string]any{}
		case k == 4:
			return nil
		case k == 5:
			a := make([]any, rng.IntN(4))
			for i := range a {
				a[i] = value(depth + 1)
			}
			return a
		default:
			m := map[string]any{}
			for range rng.IntN(4) {
				m[hostile[rng.IntN(len(hostile))]+fmt.Sprint(rng.IntN(9))] = value(depth + 1)
			}
			return m
		}
	}
	for range 300 {
		v := value(0)
		var compact, want bytes.Buffer
		enc := json.NewEncoder(&compact)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		src := bytes.TrimSuffix(compact.Bytes(), []byte("\n"))
		if err := json.Indent(&want, src, "", "  "); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		bw := bufio.NewWriter(&got)
		ix := &indenter{w: bw}
		for rest := src; len(rest) > 0; {
			n := min(1+rng.IntN(5), len(rest))
			ix.Write(rest[:n])
			rest = rest[n:]
		}
		bw.Flush()
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("indented\n%s\nwant\n%s", got.Bytes(), want.Bytes())
		}
	}
}

// testManifest is a small manifest whose strings need escaping.
func testManifest(seed byte) *objects.Manifest {
	m := &objects.Manifest{Schema: objects.ManifestSchema, Format: "safetensors", Meta: map[string]string{"from<&>": hostile[3]}}
	for i, name := range hostile {
		d := objects.Sum([]byte{seed, byte(i)})
		m.Tensors = append(m.Tensors, objects.Tensor{Name: name + fmt.Sprint(i), DType: "F32", Shape: []int64{int64(i), 2}, Size: int64(8 * i), Digest: d, Chunks: []objects.Digest{d}})
	}
	m.Tensors = append(m.Tensors, objects.Tensor{Name: "empty", DType: "F16", Shape: []int64{}, Digest: objects.Sum(nil), Chunks: []objects.Digest{}})
	m.Files = []objects.File{{Path: `model "a".safetensors`, Size: 10, Digest: objects.Sum([]byte{seed}), Role: objects.RoleContainer,
		Extents: []objects.Extent{{Kind: objects.ExtentTensor, Size: 8, Tensor: 1}, {Kind: objects.ExtentZeros, Size: 2}}}}
	return m
}

// show's and diff's documents, written a piece at a time, are the bytes
// printJSON prints for the same values.
func TestStreamedDocumentsArePrintJSON(t *testing.T) {
	a, b := testManifest(1), testManifest(2)
	b.Tensors = b.Tensors[2:]
	docs := map[string]interface{ writeJSON(*jsonDoc) }{
		"show":         showOutput{Digest: objects.Sum([]byte("v")), LogicalBytes: 10, Warnings: []string{}, Manifest: a},
		"show details": showOutput{Warnings: []string{hostile[4]}, Details: map[string]any{"kv": []any{1, "<x>", map[string]any{}}}, SHA256: map[string]string{"a": "sha256:00"}, Manifest: b},
		"show empty":   showOutput{},
		"diff":         diffOutput{From: objects.Sum([]byte("a")), To: objects.Sum([]byte("b")), Diff: objects.Compare(a, b)},
		"diff same":    diffOutput{Diff: objects.Compare(a, a), Details: []any{}},
		"diff empty":   diffOutput{},
	}
	for name, doc := range docs {
		var want, got bytes.Buffer
		if err := (&env{stdout: &want}).printJSON(doc); err != nil {
			t.Fatal(err)
		}
		if err := (&env{stdout: &got}).streamJSON(doc.writeJSON); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("%s: streamed\n%s\nprintJSON\n%s", name, got.Bytes(), want.Bytes())
		}
	}
}

// A document whose output fails part way is an error, not a success.
func TestStreamedDocumentStopsOnAFailedWrite(t *testing.T) {
	m := testManifest(3)
	for len(m.Tensors) < 5000 { // past the 64 KiB buffer
		m.Tensors = append(m.Tensors, m.Tensors[len(m.Tensors)-2])
	}
	err := (&env{stdout: &failingWriter{n: 1000, err: errors.New("broken pipe")}}).streamJSON(showOutput{Warnings: []string{}, Manifest: m}.writeJSON)
	if err == nil || !strings.Contains(err.Error(), "broken pipe") {
		t.Fatalf("streamJSON into a failing writer = %v, want its error", err)
	}
}
