package npz_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/npz"
)

// Every non-object dtype numpy writes, in C and Fortran order, in .npy
// headers v1, v2 and v3 and in a stored .npz: the codec reads each array's
// bytes exactly where numpy put them, with its dtype and shape.
const makeArrays = `
rng = np.random.default_rng(7)
dtypes = ['?', 'i1', 'u1', '<i2', '<u2', '<i4', '<u4', '<i8', '<u8', '<f2', '<f4', '<f8', '<c8', '<c16',
          '>f4', '>i8', '<U5', 'S3', 'V4', '<M8[ns]', '<m8[s]']
arrays = {}
for i, d in enumerate(dtypes):
    raw = rng.integers(0, 256, size=2 * 3 * np.dtype(d).itemsize, dtype=np.uint8).tobytes()
    a = np.frombuffer(raw, dtype=d).reshape(2, 3)
    arrays['c%d' % i] = a
    arrays['f%d' % i] = np.asfortranarray(a)
arrays['scalar'] = np.array(3.5, dtype='<f4')
arrays['empty'] = np.zeros((0, 4), dtype='<i4')
for k, a in arrays.items():
    order = 'F' if a.flags.f_contiguous and not a.flags.c_contiguous else 'C'
    open(k + '.raw', 'wb').write(a.tobytes(order=order))
np.save('one.npy', arrays['c10'])
for v in [(1, 0), (2, 0), (3, 0)]:
    with open('v%d.npy' % v[0], 'wb') as f:
        np.lib.format.write_array(f, arrays['f11'], version=v)
np.savez('all.npz', **arrays)
print(' '.join(arrays))
`

func TestNumPyFiles(t *testing.T) {
	dir := t.TempDir()
	keys := lines(numpyRun(t, dir, makeArrays))
	all := readDir(t, dir)
	raw := func(k string) []byte { return all[k+".raw"] }

	npzFiles := map[string][]byte{"all.npz": all["all.npz"]}
	_, data, dtypes := parse(t, npzFiles)
	if len(data) != len(keys) {
		t.Fatalf("%d arrays, numpy wrote %d", len(data), len(keys))
	}
	for _, k := range keys {
		if !bytes.Equal(data[k], raw(k)) {
			t.Errorf("%s (%s): the array's bytes differ from numpy's", k, dtypes[k])
		}
	}
	for k, want := range map[string]string{"c0": "BOOL", "c7": "I64", "c10": "F32", "c13": "C128", "c14": "npy:>f4", "c16": "npy:<U5", "c19": "npy:<M8[ns]"} {
		if dtypes[k] != want {
			t.Errorf("%s: dtype %s, want %s", k, dtypes[k], want)
		}
	}
	for _, p := range []string{"one.npy", "v1.npy", "v2.npy", "v3.npy"} {
		_, data, _ := parse(t, map[string][]byte{p: all[p]})
		name := p[:len(p)-4]
		want := raw("c10")
		if p != "one.npy" {
			want = raw("f11")
		}
		if !bytes.Equal(data[name], want) {
			t.Errorf("%s: the array's bytes differ from numpy's", p)
		}
	}
}

// What mstore does not take is refused, classified: object arrays (a
// pickle), structured dtypes, and damage.
func TestNumPyRefusals(t *testing.T) {
	dir := t.TempDir()
	numpyRun(t, dir, `
np.save('object.npy', np.array([{'a': 1}, None], dtype=object), allow_pickle=True)
np.savez('objects.npz', x=np.array([1, 'a'], dtype=object))
np.save('struct.npy', np.zeros(3, dtype=[('a', '<f4'), ('b', '<i2')]))
np.save('ok.npy', np.arange(6, dtype='<i4').reshape(2, 3))
`)
	all := readDir(t, dir)
	ok := all["ok.npy"]
	cases := map[string]struct {
		files map[string][]byte
		class errs.Class
	}{
		"object array":      {map[string][]byte{"object.npy": all["object.npy"]}, errs.UnsupportedVersion},
		"object array npz":  {map[string][]byte{"objects.npz": all["objects.npz"]}, errs.UnsupportedVersion},
		"structured dtype":  {map[string][]byte{"struct.npy": all["struct.npy"]}, errs.UnsupportedVersion},
		"cut short":         {map[string][]byte{"ok.npy": ok[:len(ok)-1]}, errs.InvalidArchive},
		"bytes after it":    {map[string][]byte{"ok.npy": append(bytes.Clone(ok), 0)}, errs.SchemaError},
		"no magic":          {map[string][]byte{"ok.npy": append([]byte("NUMPY!"), ok[6:]...)}, errs.InvalidArchive},
		"version 4":         {map[string][]byte{"ok.npy": append(append([]byte{}, ok[:6]...), append([]byte{4}, ok[7:]...)...)}, errs.UnsupportedVersion},
		"same name twice":   {map[string][]byte{"ok.npy": ok, "x.npz": mustPlan(t, "ok")}, errs.SchemaError},
		"header not a dict": {map[string][]byte{"ok.npy": bytes.Replace(ok, []byte("{"), []byte("["), 1)}, errs.SchemaError},
	}
	for name, c := range cases {
		_, err := npz.Codec.Parse(formattest.NewMemDir(c.files), formattest.ClaimedPaths(npz.Codec, c.files))
		if errs.ClassOf(err) != c.class {
			t.Errorf("%s: err = %v, want %s", name, err, c.class)
		}
	}
}

// mustPlan is an .npz of one I32 array of 6 elements named name.
func mustPlan(t *testing.T, name string) []byte {
	t.Helper()
	files, err := planned(name)
	if err != nil {
		t.Fatal(err)
	}
	return files["model.npz"]
}

// What Plan writes, numpy.load(allow_pickle=False) reads as the same
// arrays: dtypes, shapes and bytes.
func TestPlanLoadsInNumPy(t *testing.T) {
	dir := t.TempDir()
	files, err := planned("w")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.npz"), files["model.npz"], 0o644); err != nil {
		t.Fatal(err)
	}
	out := numpyRun(t, dir, `
z = np.load('model.npz', allow_pickle=False)
for k in sorted(z.files):
    a = z[k]
    print(k, a.dtype.str, a.shape, a.tobytes().hex())
`)
	want := "w <i4 (2, 3) 000000000100000002000000030000000400000005000000\n" +
		"x/y <f8 (2,) 000000000000f03f0000000000000040\n"
	if out != want {
		t.Fatalf("numpy.load read\n%s\nwant\n%s", out, want)
	}
}

// np.savez_compressed's .npz is laid out as its decoded stream: the arrays
// as numpy wrote them, each a tensor; damage to the compressed bytes is
// refused.
func TestSavezCompressed(t *testing.T) {
	dir := t.TempDir()
	keys := lines(numpyRun(t, dir, makeArrays+`
np.savez_compressed('z.npz', **arrays)
`))
	all := readDir(t, dir)
	files := map[string][]byte{"z.npz": all["z.npz"]}
	l, err := npz.Codec.Parse(formattest.NewMemDir(files), []string{"z.npz"})
	if err != nil {
		t.Fatal(err)
	}
	if l.Files[0].Meta[formats.MetaCompression] != npz.Compression {
		t.Fatalf("meta %v", l.Files[0].Meta)
	}
	stream := map[string][]byte{"z.npz": decoded(t, files, "z.npz")}
	if err := formattest.CheckLayout(l, stream); err != nil {
		t.Fatal(err)
	}
	data, err := formattest.TensorData(l, stream)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Tensors) != len(keys) {
		t.Fatalf("%d arrays, numpy wrote %d", len(l.Tensors), len(keys))
	}
	for i, tn := range l.Tensors {
		if !bytes.Equal(data[i], all[tn.Name+".raw"]) {
			t.Errorf("%s: the array's bytes differ from numpy's", tn.Name)
		}
	}
	// A flipped bit in the deflated data, or a cut, is refused.
	b := bytes.Clone(files["z.npz"])
	b[len(b)/2] ^= 0x10
	if _, err := npz.Codec.Parse(formattest.NewMemDir(map[string][]byte{"z.npz": b}), []string{"z.npz"}); errs.ClassOf(err) == 0 {
		t.Errorf("a damaged archive: err = %v, want a classified refusal", err)
	}
	b = files["z.npz"][:len(files["z.npz"])-30]
	if _, err := npz.Codec.Parse(formattest.NewMemDir(map[string][]byte{"z.npz": b}), []string{"z.npz"}); errs.ClassOf(err) != errs.InvalidArchive {
		t.Errorf("a cut archive: err = %v, want invalid_archive", err)
	}
}
