package restorer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats/safetensors"
	"github.com/mstore/mstore/internal/modeldir"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

// restorerGoroutines returns the stacks of the goroutines, other than the
// caller's, that are running code of this package.
func restorerGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	stacks := strings.Split(string(buf), "\n\n")
	var out []string
	for _, s := range stacks[1:] { // the first is the caller's own
		if strings.Contains(s, "mstore/internal/restorer.") {
			out = append(out, s)
		}
	}
	return out
}

// stallingSource fails the first blob it is asked for (after a while, so
// that other reads have begun) and makes every other one take longer, as
// a slow disk would.
type stallingSource struct {
	reads, inFlight atomic.Int32
}

var errBadBlob = errs.New(errs.IntegrityError, "test", "blob hashes wrong")

func (s *stallingSource) read(pcs []piece, buf []byte) ([][]byte, error) {
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	if s.reads.Add(1) == 1 {
		time.Sleep(10 * time.Millisecond) // the others are under way meanwhile
		return nil, errBadBlob
	}
	time.Sleep(50 * time.Millisecond)
	var out [][]byte
	for _, pc := range pcs {
		out = append(out, make([]byte, pc.size))
	}
	return out, nil
}

// TestNoFetchOutlivesWriteAll: after a blob read fails, writeAll returns
// only once every fetch it started has ended (a fetch running on would
// read the store after the checkout has let go of its lock).
func TestNoFetchOutlivesWriteAll(t *testing.T) {
	var files []planFile
	for f := range 3 {
		pf := planFile{path: fmt.Sprintf("f%d", f)}
		for i := range 16 {
			// Each large enough to be read alone (batchPiece).
			d := objects.Sum([]byte{byte(f), byte(i)})
			pf.pieces = append(pf.pieces, piece{blob: &d, size: batchPiece})
			pf.size += batchPiece
		}
		files = append(files, pf)
	}
	src := &stallingSource{}
	err := writeAll(context.Background(), src, &plan{files: files}, t.TempDir(), Options{Workers: 4})
	if !errors.Is(err, errBadBlob) {
		t.Fatalf("err = %v, want the blob's error", err)
	}
	if n := src.inFlight.Load(); n != 0 {
		t.Fatalf("%d blob reads still running when writeAll returned", n)
	}
	if g := restorerGoroutines(); len(g) > 0 {
		t.Fatalf("%d goroutines of the checkout still running:\n%s", len(g), strings.Join(g, "\n\n"))
	}
	if src.reads.Load() < 2 {
		t.Fatalf("only %d reads: the test did not have fetches in flight at the error", src.reads.Load())
	}
}

// TestNoGoroutineOutlivesFailedCheckout: a checkout whose stored blobs are
// corrupt fails with integrity_error, and when Checkout returns nothing of
// it is still running and nothing is left beside DEST.
func TestNoGoroutineOutlivesFailedCheckout(t *testing.T) {
	st, _, d := added(t, testmodel.Spec{Layers: 4, Hidden: 256, Vocab: 2048, DType: "F32", Seed: 4})
	var flipped int
	filepath.WalkDir(filepath.Join(st.Dir(), "objects"), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			return err
		}
		for i := 0; i < len(b); i += 4096 {
			b[i] ^= 0xff
		}
		os.Chmod(p, 0o644)
		flipped++
		return os.WriteFile(p, b, 0o644)
	})
	if flipped < 2 {
		t.Fatalf("%d blob files to corrupt; the test needs several", flipped)
	}
	parent := t.TempDir()
	_, err := Checkout(context.Background(), st, d, filepath.Join(parent, "out"), Options{Workers: 4})
	if errs.ClassOf(err) != errs.IntegrityError {
		t.Fatalf("err = %v, want integrity_error", err)
	}
	if g := restorerGoroutines(); len(g) > 0 {
		t.Fatalf("%d goroutines of the checkout still running after it returned:\n%s", len(g), strings.Join(g, "\n\n"))
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Fatalf("left beside the destination: %v", left)
	}
}

// TestHashTensorsHonoursContext: the re-hash of written tensors stops when
// its context is done instead of reading every tensor.
func TestHashTensorsHonoursContext(t *testing.T) {
	st, _, d := added(t, testmodel.Tiny)
	out := filepath.Join(t.TempDir(), "out")
	if _, err := Checkout(context.Background(), st, d, out, Options{}); err != nil {
		t.Fatal(err)
	}
	m := manifestOf(t, st, d)
	dir, err := modeldir.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	codec := safetensors.Codec
	l, err := codec.Parse(dir, dir.SortedFiles(codec.Claims))
	if err != nil {
		t.Fatal(err)
	}
	if err := hashTensors(context.Background(), dir, l, m.Tensors); err != nil {
		t.Fatalf("hashTensors on a good checkout: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := hashTensors(ctx, dir, l, m.Tensors); !errors.Is(err, context.Canceled) {
		t.Fatalf("hashTensors with a cancelled context: %v, want context.Canceled", err)
	}
}

func manifestOf(t *testing.T, st *store.Store, d objects.Digest) *objects.Manifest {
	t.Helper()
	var m *objects.Manifest
	if err := st.View(func(tx *bolt.Tx) (err error) {
		m, err = st.Manifest(tx, d)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return m
}
