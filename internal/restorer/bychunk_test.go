package restorer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mstore/mstore/internal/codecs"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/cast"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/safetensors"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/testmodel"
)

// A --dtype cast of a tensor of several chunks is made a chunk at a time
// (one derived piece per source chunk), in every format that casts, and
// gives, byte for byte, what the cast of the whole tensor gives, with the
// tensor's digest recorded for the check of the written files.
func TestCastByChunkIsTheWholeCast(t *testing.T) {
	spec := testmodel.Spec{Layers: 1, Hidden: 64, Vocab: 40000, DType: "F32", Seed: 7} // an embedding of three chunks
	st, dir, d := added(t, spec)
	source := tensorsIn(t, dir)
	m := manifestOf(t, st, d)
	for _, format := range []string{"safetensors", "npz", "pytorch", "gguf"} {
		t.Run(format, func(t *testing.T) {
			opts := Options{Format: format, WriteOptions: formats.WriteOptions{DType: "f16", Clamp: true}}
			p, _ := planned(t, st, d, opts)
			parts := 0
			for _, f := range p.files {
				for _, pc := range f.pieces {
					if pc.derived != nil && pc.derived.part != nil {
						parts++
					}
				}
			}
			if parts < 3 {
				t.Fatalf("%d pieces cast a chunk at a time, want the embedding's three chunks at least", parts)
			}
			out := filepath.Join(t.TempDir(), "out")
			if _, err := Checkout(context.Background(), st, d, out, opts); err != nil {
				t.Fatal(err)
			}
			codec, _ := codecs.ByName(format)
			written := tensorBytes(t, codec, out)
			_, tr, err := cast.Tensors(m.Tensors, opts.WriteOptions)
			if err != nil {
				t.Fatal(err)
			}
			for i, tn := range m.Tensors {
				want, err := tr[i](source[tn.Name])
				if err != nil {
					t.Fatal(err)
				}
				dtype := "F16"
				if format == "gguf" && len(tn.Shape) <= 1 { // norms stay F32 in GGUF
					dtype, want = "F32", source[tn.Name]
				}
				if got := written[tn.Name]; got != dtype+":"+string(want) {
					t.Fatalf("tensor %q (%d chunks) written differs from its whole cast", tn.Name, len(tn.Chunks))
				}
			}
		})
	}
}

// byteCast is a transform of two bytes an element to one, the first: a
// cast to test the parts with.
func byteCast(src []byte) ([]byte, error) {
	out := make([]byte, len(src)/2)
	for i := range out {
		out[i] = src[2*i]
	}
	return out, nil
}

// partsOf makes a tensor of size bytes and its parts, cast by tr.
func partsOf(t *testing.T, size int64, tr Transform) ([]byte, objects.Tensor, []piece, *objects.Digest) {
	t.Helper()
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i * 7)
	}
	tn := objects.Tensor{Name: "w", Size: size, Digest: objects.Sum(src)}
	for c := range objects.ChunkCount(size) {
		off, n := objects.ChunkBounds(size, c)
		tn.Chunks = append(tn.Chunks, objects.Sum(src[off:off+n]))
	}
	digest := new(objects.Digest)
	parts := castParts(&derived{source: tn, transform: tr, digest: digest}, size/2, 1)
	if len(parts) != len(tn.Chunks) {
		t.Fatalf("%d parts of a source of %d chunks", len(parts), len(tn.Chunks))
	}
	return src, tn, parts, digest
}

// The parts of a tensor may be made in any order, on any goroutine: each
// hashes after the one before it, and the last records the digest of
// everything made, in order.
func TestCastPartsHashInOrder(t *testing.T) {
	size := int64(3*objects.ChunkSize + 1000)
	src, _, parts, digest := partsOf(t, size, byteCast)
	made := make([][]byte, len(parts))
	failed := make([]error, len(parts))
	var wg sync.WaitGroup
	for k := len(parts) - 1; k >= 0; k-- { // the last started first
		wg.Go(func() {
			off, n := objects.ChunkBounds(size, k)
			made[k], failed[k] = parts[k].derived.apply(src[off:off+n], parts[k].size)
		})
	}
	wg.Wait()
	var all []byte
	for k := range parts {
		if failed[k] != nil {
			t.Fatalf("part %d: %v", k, failed[k])
		}
		all = append(all, made[k]...)
	}
	want, _ := byteCast(src)
	if string(all) != string(want) || *digest != objects.Sum(want) {
		t.Fatal("the parts made other bytes, or another digest, than the whole cast")
	}
}

// Chunks that each match their digest but not, together, the source
// tensor's are refused at the last part, as a whole-tensor cast refuses
// them; a part that fails fails every part after it with its error (and
// class), and none before.
func TestCastPartsRefuse(t *testing.T) {
	size := int64(2*objects.ChunkSize + 10)
	t.Run("source digest", func(t *testing.T) {
		src, _, parts, _ := partsOf(t, size, byteCast)
		for k := range parts {
			parts[k].derived.source.Digest = objects.Sum([]byte("another tensor"))
		}
		var err error
		for k := range parts {
			off, n := objects.ChunkBounds(size, k)
			_, err = parts[k].derived.apply(src[off:off+n], parts[k].size)
			if k < len(parts)-1 && err != nil {
				t.Fatalf("part %d: %v", k, err)
			}
		}
		if !errors.Is(err, errs.IntegrityError) || !strings.Contains(err.Error(), "tensor w: content hashes to") {
			t.Fatalf("last part: err = %v, want integrity_error", err)
		}
	})
	t.Run("a failed part", func(t *testing.T) {
		lossy := errs.New(errs.LossyConversion, "test", "out of range")
		calls := 0
		src, _, parts, _ := partsOf(t, size, func(b []byte) ([]byte, error) {
			if calls++; calls == 2 {
				return nil, lossy
			}
			return byteCast(b)
		})
		for k := range parts {
			off, n := objects.ChunkBounds(size, k)
			_, err := parts[k].derived.apply(src[off:off+n], parts[k].size)
			switch {
			case k == 0 && err != nil:
				t.Fatalf("part 0: %v", err)
			case k == 1 && !errors.Is(err, lossy):
				t.Fatalf("part 1: err = %v, want the transform's", err)
			case k == 2 && (!errors.Is(err, lossy) || !strings.Contains(err.Error(), "chunk 1 was not made")):
				t.Fatalf("part 2: err = %v, want a refusal naming chunk 1, with its cause", err)
			}
		}
	})
}

// A tensor of one chunk, or whose output is not a whole number of bytes
// a chunk, is made whole.
func TestCastPartsOnlyWhereTheyFit(t *testing.T) {
	for _, tc := range []struct{ size, out int64 }{
		{objects.ChunkSize, objects.ChunkSize / 2},         // one chunk
		{2*objects.ChunkSize + 3, objects.ChunkSize + 1},   // no whole ratio with an odd tail
		{2 * objects.ChunkSize, 2*objects.ChunkSize/3 + 1}, // no whole ratio
	} {
		tn := objects.Tensor{Name: "w", Size: tc.size, Chunks: make([]objects.Digest, objects.ChunkCount(tc.size))}
		if parts := castParts(&derived{source: tn, transform: byteCast}, tc.out, 1); parts != nil {
			t.Errorf("%s: %d parts", fmt.Sprint(tc), len(parts))
		}
	}
}

// A value out of the target's range in a late chunk of a large tensor
// refuses the checkout with lossy_conversion, the cast's own refusal (not
// that of a part after it, which is not made), and leaves nothing at the
// destination: the chunks before it were made and written, and their
// file is thrown away with the rest.
func TestCastByChunkRefusesALateOverflow(t *testing.T) {
	const n = 3 * objects.ChunkSize / 4 // F32 values: three chunks
	data := make([]byte, 4*n)
	binary.LittleEndian.PutUint32(data[len(data)-8:], math.Float32bits(1e30)) // in the last chunk
	tensors := []formats.Tensor{{Name: "w", DType: "F32", Shape: []int64{n}, Size: 4 * n}}
	l, err := safetensors.Plan(tensors, safetensors.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	files, err := formattest.Materialize(l, [][]byte{data})
	if err != nil {
		t.Fatal(err)
	}
	st := newStore(t)
	d := addFiles(t, st, "late", files)
	parent := t.TempDir()
	_, err = Checkout(context.Background(), st, d, filepath.Join(parent, "out"), Options{WriteOptions: formats.WriteOptions{DType: "f16"}})
	if !errors.Is(err, errs.LossyConversion) || !strings.Contains(err.Error(), `tensor "w" (F32) has values outside the F16 range (1 among`) {
		t.Fatalf("err = %v, want the cast's lossy_conversion", err)
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}
