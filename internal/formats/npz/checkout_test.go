package npz_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/safetensors"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/restorer"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "store"), true, store.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func add(t *testing.T, st *store.Store, dir, name string) objects.Digest {
	t.Helper()
	res, err := archiver.Add(context.Background(), st, dir, archiver.Options{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return res.Digest
}

func checkout(t *testing.T, st *store.Store, d objects.Digest, opts restorer.Options) (string, error) {
	t.Helper()
	dest := filepath.Join(t.TempDir(), "out")
	_, err := restorer.Checkout(context.Background(), st, d, dest, opts)
	return dest, err
}

// loaded is what numpy.load(allow_pickle=False) reads from every .npz in
// dir: "key dtype shape hex" lines, sorted.
func loaded(t *testing.T, dir string) string {
	t.Helper()
	return numpyRun(t, dir, `
import glob
out = []
for p in glob.glob('**/*.npz', recursive=True):
    z = np.load(p, allow_pickle=False)
    for k in z.files:
        a = z[k]
        out.append('%s %s %s %s' % (k, a.dtype.str, list(a.shape), a.tobytes(order='C').hex()))
print('\n'.join(sorted(out)))
`)
}

// An .npz that numpy wrote is added and checked out byte-identical; laid
// out again (--dtype) or converted to SafeTensors, its arrays come out in C
// order, as numpy reads them; a model of another format converts to an
// .npz that numpy.load(allow_pickle=False) reads with the same values.
func TestAddCheckoutConvert(t *testing.T) {
	src := t.TempDir()
	want := numpyRun(t, src, `
a = np.arange(6, dtype='<f4').reshape(2, 3)
f = np.asfortranarray(np.arange(24, dtype='<i8').reshape(2, 3, 4))
np.savez('weights.npz', a=a, f=f, b=np.array([True, False, True]), h=np.arange(4, dtype='<f2'))
z = np.load('weights.npz')
print('\n'.join(sorted('%s %s %s %s' % (k, z[k].dtype.str, list(z[k].shape), z[k].tobytes(order='C').hex()) for k in z.files)))
`)
	orig, err := os.ReadFile(filepath.Join(src, "weights.npz"))
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	d := add(t, st, src, "np")

	same, err := checkout(t, st, d, restorer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := readDir(t, same)["weights.npz"]; !bytes.Equal(got, orig) {
		t.Fatal("the checkout is not byte-identical to what numpy wrote")
	}

	// A re-layout writes C order (numpy reads the same values).
	relaid, err := checkout(t, st, d, restorer.Options{WriteOptions: formats.WriteOptions{Tensors: []string{"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := loaded(t, relaid); got != want {
		t.Fatalf("re-laid-out arrays:\n%s\nwant\n%s", got, want)
	}

	// To SafeTensors: the Fortran-order array transposed into C order.
	stDir, err := checkout(t, st, d, restorer.Options{Format: "safetensors"})
	if err != nil {
		t.Fatal(err)
	}
	files := readDir(t, stDir)
	l, err := safetensors.Codec.Parse(formattest.NewMemDir(files), formattest.ClaimedPaths(safetensors.Codec, files))
	if err != nil {
		t.Fatal(err)
	}
	data, err := formattest.TensorData(l, files)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	descr := map[string]string{"F32": "<f4", "I64": "<i8", "BOOL": "|b1", "F16": "<f2"}
	for i, tn := range l.Tensors {
		lines = append(lines, fmt.Sprintf("%s %s %s %s", tn.Name, descr[tn.DType], strings.ReplaceAll(fmt.Sprint(tn.Shape), " ", ", "), hex.EncodeToString(data[i])))
	}
	sort.Strings(lines)
	if got := strings.Join(lines, "\n") + "\n"; got != want {
		t.Fatalf("SafeTensors checkout:\n%s\nwant\n%s", got, want)
	}
	if _, ok := files["weights.safetensors"]; !ok {
		t.Errorf("the SafeTensors file is not named after the .npz: %v", formattest.ClaimedPaths(safetensors.Codec, files))
	}

	// Back from SafeTensors to .npz, cast to f32: numpy reads it.
	d2 := add(t, st, stDir, "st")
	back, err := checkout(t, st, d2, restorer.Options{Format: "npz", WriteOptions: formats.WriteOptions{DType: "f32"}})
	if err != nil {
		t.Fatal(err)
	}
	got := loaded(t, back)
	if !strings.Contains(got, "h <f4 [4] 000000000000803f0000004000004040") || !strings.Contains(got, "f <i8 [2, 3, 4]") {
		t.Fatalf("npz from SafeTensors, cast to f32:\n%s", got)
	}
}

// Another format's model converts to an .npz numpy reads, except what
// NumPy has no dtype for (BF16: lossy_conversion unless cast); options an
// .npz does not take are refused.
func TestConvertToNPZ(t *testing.T) {
	st := openStore(t)
	dir := filepath.Join(t.TempDir(), "model")
	spec := testmodel.Spec{Layers: 1, Hidden: 8, Vocab: 16, DType: "BF16", Seed: 4}
	files, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := testmodel.Write(dir, files); err != nil {
		t.Fatal(err)
	}
	d := add(t, st, dir, "bf16")
	if _, err := checkout(t, st, d, restorer.Options{Format: "npz"}); errs.ClassOf(err) != errs.LossyConversion {
		t.Fatalf("BF16 to .npz: err = %v, want lossy_conversion", err)
	}
	if _, err := checkout(t, st, d, restorer.Options{Format: "npz", WriteOptions: formats.WriteOptions{MaxShardSize: 1 << 20}}); errs.ClassOf(err) != errs.SchemaError {
		t.Fatalf("--max-shard-size into .npz: err = %v, want schema_error", err)
	}
	out, err := checkout(t, st, d, restorer.Options{Format: "npz", WriteOptions: formats.WriteOptions{DType: "f32"}})
	if err != nil {
		t.Fatal(err)
	}
	got := loaded(t, out)
	if n := strings.Count(got, " <f4 "); n != len(spec.Tensors()) {
		t.Fatalf("numpy read %d F32 arrays, want %d:\n%s", n, len(spec.Tensors()), got)
	}
	if _, ok := readDir(t, out)["model.npz"]; !ok {
		t.Fatalf("no model.npz in %v", readDir(t, out))
	}
}

// A single .npy file (big-endian, Fortran order, header v3) is added and
// checked out byte-identical; laid out again, it is an .npz in which numpy
// reads the same values; as
// SafeTensors, which has no big-endian dtypes, it is lossy_conversion.
func TestAddNPYFile(t *testing.T) {
	src := t.TempDir()
	want := numpyRun(t, src, `
a = np.asfortranarray(np.arange(6, dtype='>f4').reshape(2, 3))
with open('w.npy', 'wb') as f:
    np.lib.format.write_array(f, a, version=(3, 0))
print('w %s %s %s' % (a.dtype.str, list(a.shape), a.tobytes(order='C').hex()))
`)
	orig, err := os.ReadFile(filepath.Join(src, "w.npy"))
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	d := add(t, st, filepath.Join(src, "w.npy"), "")
	same, err := checkout(t, st, d, restorer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readDir(t, same)["w.npy"], orig) {
		t.Fatal("the checkout is not byte-identical")
	}
	out, err := checkout(t, st, d, restorer.Options{WriteOptions: formats.WriteOptions{Tensors: []string{"*"}}}) // laid out again: an .npz
	if err != nil {
		t.Fatal(err)
	}
	if got := loaded(t, out); got != want {
		t.Fatalf("as .npz (%v):\n%s\nwant\n%s", readDir(t, out), got, want)
	}
	if _, err := checkout(t, st, d, restorer.Options{Format: "safetensors"}); errs.ClassOf(err) != errs.LossyConversion {
		t.Fatalf("big-endian to SafeTensors: err = %v, want lossy_conversion", err)
	}
}

// An np.savez_compressed archive is added, checked out as a deflated .npz
// that numpy reads with the same arrays (deflated again canonically: the
// same bytes every time), which adds back to the same version; it
// converts to SafeTensors like any other.
func TestAddCheckoutCompressed(t *testing.T) {
	src := t.TempDir()
	want := numpyRun(t, src, `
a = np.arange(600, dtype='<f4').reshape(20, 30)
f = np.asfortranarray(np.arange(24, dtype='<i8').reshape(2, 3, 4))
np.savez_compressed('c.npz', a=a, f=f)
z = np.load('c.npz')
print('\n'.join(sorted('%s %s %s %s' % (k, z[k].dtype.str, list(z[k].shape), z[k].tobytes(order='C').hex()) for k in z.files)))
`)
	st := openStore(t)
	d := add(t, st, src, "c")
	one, err := checkout(t, st, d, restorer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := loaded(t, one); got != want {
		t.Fatalf("checked out:\n%s\nwant\n%s", got, want)
	}
	two, err := checkout(t, st, d, restorer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readDir(t, one)["c.npz"], readDir(t, two)["c.npz"]) {
		t.Error("two checkouts of one version differ")
	}
	if numpyRun(t, one, "print(np.load('c.npz').zip.infolist()[0].compress_type)") != "8\n" {
		t.Error("the checkout is not deflated")
	}
	if again := add(t, st, one, "c2"); again != d {
		t.Errorf("the checkout adds as %s, not %s", again.Short(), d.Short())
	}
	stDir, err := checkout(t, st, d, restorer.Options{Format: "safetensors"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := readDir(t, stDir)["c.safetensors"]; !ok {
		t.Fatalf("no c.safetensors in %v", readDir(t, stDir))
	}
}
