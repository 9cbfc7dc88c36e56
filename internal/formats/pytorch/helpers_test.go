package pytorch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/zipfile"
	"github.com/mstore/mstore/internal/testenv"
)

// testdataDir finds shared/testdata/SUB by walking up from the working
// directory; "" when it is not there.
func testdataDir(sub string) string { return formattest.SharedTestdata(sub) }

// realFiles returns the real third-party files under shared/testdata/SUB
// (recursively) by path relative to it, or skips the test.
func realFiles(t testing.TB, sub string) map[string][]byte {
	t.Helper()
	dir := testdataDir(sub)
	if dir == "" {
		testenv.Missing(t, "no shared/testdata/%s above the working directory: real-file checks skipped", sub)
	}
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// parse parses one checkpoint held in memory as "m.pt".
func parse(b []byte) (*formats.Layout, error) {
	return Codec.Parse(formattest.NewMemDir(map[string][]byte{"m.pt": b}), []string{"m.pt"})
}

// wantClass fails unless err has class and its message contains every
// one of names.
func wantClass(t *testing.T, err error, class errs.Class, names ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted, want %s", class.Key())
	}
	if !errors.Is(err, class) || errs.ClassOf(err) != class {
		t.Fatalf("err = %v, want class %s", err, class.Key())
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Fatalf("err = %v, want it to name %q", err, n)
		}
	}
}

// zipMember is one member of a test archive.
type zipMember struct {
	name string
	data []byte
}

// zipOf writes members as torch.save lays them out.
func zipOf(members ...zipMember) []byte {
	w := &zipfile.Writer{}
	for _, m := range members {
		w.AddBytes(m.name, m.data)
	}
	f := w.Finish("m.pt")
	var b []byte
	for _, e := range f.Extents {
		b = append(b, e.Bytes...)
	}
	return b
}

// checkpointOf is a valid archive "archive/…" around a pickle and its
// storages (data/KEY).
func checkpointOf(pkl []byte, storages map[string][]byte) []byte {
	members := []zipMember{{"archive/data.pkl", pkl}, {"archive/byteorder", []byte("little")}}
	for _, k := range sortedKeys(storages) {
		members = append(members, zipMember{"archive/data/" + k, storages[k]})
	}
	return zipOf(append(members, zipMember{"archive/version", []byte("3\n")})...)
}

// pk builds pickles by hand, opcode by opcode.
type pk struct{ b []byte }

func newPickle() *pk { return &pk{b: []byte{opProto, 2}} }

func (p *pk) op(ops ...byte) *pk { p.b = append(p.b, ops...); return p }

func (p *pk) global(module, name string) *pk {
	p.b = append(append(append(append(append(p.b, opGlobal), module...), '\n'), name...), '\n')
	return p
}

func (p *pk) str(s string) *pk {
	p.b = binary.LittleEndian.AppendUint32(append(p.b, opBinUnicode), uint32(len(s)))
	p.b = append(p.b, s...)
	return p
}

func (p *pk) int(n int64) *pk {
	if n >= 0 && n < 256 {
		return p.op(opBinInt1, byte(n))
	}
	p.b = binary.LittleEndian.AppendUint32(append(p.b, opBinInt), uint32(int32(n)))
	return p
}

func (p *pk) tuple(ns ...int64) *pk {
	p.op(opMark)
	for _, n := range ns {
		p.int(n)
	}
	return p.op(opTuple)
}

// storage pushes the persistent id of storage KEY of class cls.
func (p *pk) storage(cls, key string, numel int64) *pk {
	module := "torch"
	if cls == "UntypedStorage" {
		module = "torch.storage"
	}
	return p.op(opMark).str("storage").global(module, cls).str(key).str("cpu").int(numel).op(opTuple, opBinPersID)
}

// rebuild pushes _rebuild_tensor_v2 of a storage.
func (p *pk) rebuild(cls, key string, numel, offset int64, shape, stride []int64) *pk {
	p.global("torch._utils", "_rebuild_tensor_v2").op(opMark)
	p.storage(cls, key, numel).int(offset).tuple(shape...).tuple(stride...)
	return p.op(opNewFalse).global("collections", "OrderedDict").op(opEmptyTuple, opReduce, opTuple, opReduce)
}

// dict starts an OrderedDict and a MARK for its items.
func (p *pk) dict() *pk {
	return p.global("collections", "OrderedDict").op(opEmptyTuple, opReduce, opMark)
}

// end closes the items of dict() and the pickle.
func (p *pk) end() []byte { return append(p.b, opSetItems, opStop) }

func (p *pk) stop() []byte { return append(p.b, opStop) }

// f32 is n little-endian float32 values 0, 1, 2, …
func f32(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		binary.Write(&b, binary.LittleEndian, float32(i))
	}
	return b.Bytes()
}

// materialize writes a planned layout of tensors with content() bytes.
func materialize(t testing.TB, l *formats.Layout, tensors []formats.Tensor) map[string][]byte {
	t.Helper()
	data := make([][]byte, len(l.Tensors))
	for i, tn := range l.Tensors {
		data[i] = formattest.Content(tn.Name, tn.Size)
	}
	files, err := formattest.Materialize(l, data)
	if err != nil {
		t.Fatal(err)
	}
	return files
}
