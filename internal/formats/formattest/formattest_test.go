package formattest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
)

// toy is a minimal container for testing the suite itself: a 4-byte
// little-endian length n, then n bytes of the one tensor "t" (U8).
type toy struct {
	// sloppy makes Parse trust the length: it panics on short files and
	// returns unclassified errors, which the suite must report.
	sloppy bool
}

func (toy) Name() string         { return "toy" }
func (toy) Claims(p string) bool { return strings.HasSuffix(p, ".toy") }
func (c toy) Parse(dir formats.Dir, paths []string) (*formats.Layout, error) {
	l := &formats.Layout{Format: "toy"}
	for _, p := range paths {
		f, err := dir.Open(p)
		if err != nil {
			return nil, err
		}
		size := f.Size()
		var hdr [4]byte
		if _, err := f.ReadAt(hdr[:], 0); err != nil {
			if c.sloppy {
				panic("short file")
			}
			return nil, errs.At(errs.InvalidArchive, "toy", p, 0, "truncated")
		}
		n := int64(binary.LittleEndian.Uint32(hdr[:]))
		if n != size-4 {
			if c.sloppy {
				return nil, fmt.Errorf("bad length %d", n)
			}
			return nil, errs.At(errs.InvalidArchive, "toy", p, 0, "length %d, file %d", n, size)
		}
		l.Files = append(l.Files, formats.File{Path: p, Size: size, Extents: []formats.Extent{
			{Kind: formats.Frame, Size: 4},
			{Kind: formats.TensorData, Offset: 4, Size: n, Tensor: len(l.Tensors)},
		}})
		l.Tensors = append(l.Tensors, formats.Tensor{Name: fmt.Sprintf("t%d", len(l.Tensors)), DType: "U8", Shape: []int64{n}, Size: n})
	}
	return l, nil
}

func toyFile(data string) []byte {
	return append(binary.LittleEndian.AppendUint32(nil, uint32(len(data))), data...)
}

func toyReplan(parsed *formats.Layout) (*formats.Layout, error) {
	l := &formats.Layout{Format: "toy", Tensors: parsed.Tensors}
	for i, tn := range parsed.Tensors {
		hdr := binary.LittleEndian.AppendUint32(nil, uint32(tn.Size))
		l.Files = append(l.Files, formats.File{Path: fmt.Sprintf("out%d.toy", i), Size: 4 + tn.Size, Extents: []formats.Extent{
			{Kind: formats.Frame, Size: 4, Bytes: hdr},
			{Kind: formats.TensorData, Offset: 4, Size: tn.Size, Tensor: i},
		}})
	}
	return l, nil
}

func TestSuitePassesAWellBehavedCodec(t *testing.T) {
	Suite{Codec: toy{}, Replan: toyReplan, Samples: []Sample{
		{Name: "one", Files: map[string][]byte{"a.toy": toyFile("hello"), "README": []byte("not claimed")}},
		{Name: "two", Files: map[string][]byte{"a.toy": toyFile(""), "b/c.toy": toyFile(strings.Repeat("x", 3000))}},
	}}.Run(t)
}

type recorder struct{ reports []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.reports = append(r.reports, fmt.Sprintf(format, args...))
}

func TestSuiteReportsPanicsAndUnclassifiedErrors(t *testing.T) {
	files := map[string][]byte{"a.toy": toyFile("hello")}
	l, err := toy{}.Parse(NewMemDir(files), []string{"a.toy"})
	if err != nil {
		t.Fatal(err)
	}
	s := Suite{Codec: toy{sloppy: true}}
	var r recorder
	s.checkTruncations(&r, files, []string{"a.toy"}, l.Files[0], 100)
	if len(r.reports) == 0 || !strings.Contains(r.reports[0], "a.toy truncated to 0 of 9 bytes: formattest: Parse panicked: short file") {
		t.Errorf("reports: %q", r.reports)
	}
	if len(r.reports) != maxReportsPerFile+1 || !strings.Contains(r.reports[maxReportsPerFile], "further failures not shown") {
		t.Errorf("%d reports, want %d and a note", len(r.reports), maxReportsPerFile+1)
	}
	r = recorder{}
	s.checkBitFlips(&r, files, []string{"a.toy"}, l.Files[0], 1000)
	if len(r.reports) == 0 || !strings.Contains(r.reports[0], "bit 0 of byte 0 flipped: unclassified error: bad length 4") {
		t.Errorf("reports: %q", r.reports)
	}
	r = recorder{}
	Suite{Codec: toy{}}.checkBitFlips(&r, files, []string{"a.toy"}, l.Files[0], 1000)
	if len(r.reports) != 0 {
		t.Errorf("well-behaved codec reported: %v", r.reports)
	}
}

func TestMemDir(t *testing.T) {
	d := NewMemDir(map[string][]byte{"b": []byte("xyz"), "a/c": nil})
	for _, bad := range []string{"../x", "/b", "a//c", `a\c`, "./b", "", "a/../b", "b/"} {
		if _, err := d.Open(bad); errs.ClassOf(err) != errs.PathTraversal {
			t.Errorf("Open(%q): %v, want path_traversal", bad, err)
		}
		if _, err := d.Stat(bad); errs.ClassOf(err) != errs.PathTraversal {
			t.Errorf("Stat(%q): %v, want path_traversal", bad, err)
		}
	}
	if _, err := d.Open("nope"); !errors.Is(err, fs.ErrNotExist) || errs.ClassOf(err) != errs.NotFound {
		t.Errorf("missing file: %v", err)
	}
	f, err := d.Open("b")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if n, err := f.ReadAt(buf, 1); n != 2 || err != nil || string(buf) != "yz" || f.Size() != 3 || f.Close() != nil {
		t.Errorf("ReadAt: %d %v %q size %d", n, err, buf, f.Size())
	}
	if size, err := d.Stat("b"); size != 3 || err != nil {
		t.Errorf("Stat: %d %v", size, err)
	}
	if got := strings.Join(d.Paths(), ","); got != "a/c,b" {
		t.Errorf("Paths: %s", got)
	}
}

func TestCheckLayoutFindsInconsistencies(t *testing.T) {
	files := map[string][]byte{"a": {1, 2, 3, 4, 0, 0}, "b": {9}}
	good := func() *formats.Layout {
		return &formats.Layout{
			Files: []formats.File{
				{Path: "a", Size: 6, Extents: []formats.Extent{
					{Kind: formats.Frame, Size: 2, Bytes: []byte{1, 2}},
					{Kind: formats.TensorData, Offset: 2, Size: 2, Tensor: 0},
					{Kind: formats.Zeros, Offset: 4, Size: 2},
				}},
				{Path: "b", Size: 1, Extents: []formats.Extent{{Kind: formats.TensorData, Size: 1, Tensor: 1}}},
			},
			Tensors: []formats.Tensor{{Name: "x", DType: "U8", Shape: []int64{2}, Size: 2}, {Name: "y", DType: "U8", Size: 1}},
		}
	}
	if err := CheckLayout(good(), files); err != nil {
		t.Fatalf("consistent layout refused: %v", err)
	}
	cases := map[string]func(l *formats.Layout){
		"files out of order":  func(l *formats.Layout) { l.Files[0], l.Files[1] = l.Files[1], l.Files[0] },
		"missing file":        func(l *formats.Layout) { l.Files[1].Path = "c" },
		"wrong size":          func(l *formats.Layout) { l.Files[1].Size = 2 },
		"gap":                 func(l *formats.Layout) { l.Files[0].Extents[1].Offset = 3 },
		"short cover":         func(l *formats.Layout) { l.Files[0].Extents = l.Files[0].Extents[:2] },
		"past the end":        func(l *formats.Layout) { l.Files[0].Extents[2].Size = 3 },
		"frame bytes differ":  func(l *formats.Layout) { l.Files[0].Extents[0].Bytes = []byte{1, 3} },
		"zeros not zero":      func(l *formats.Layout) { l.Files[0].Extents[1].Kind = formats.Zeros },
		"invalid kind":        func(l *formats.Layout) { l.Files[0].Extents[0].Kind = 0 },
		"tensor out of range": func(l *formats.Layout) { l.Files[1].Extents[0].Tensor = 2 },
		"tensor in no file":   func(l *formats.Layout) { l.Tensors = append(l.Tensors, formats.Tensor{Name: "z", DType: "U8"}) },
		"tensor size":         func(l *formats.Layout) { l.Tensors[0].Size = 3 },
		"duplicate name":      func(l *formats.Layout) { l.Tensors[1].Name = "x" },
		"no dtype":            func(l *formats.Layout) { l.Tensors[1].DType = "" },
		// The archiver's rule: a tensor extent is the whole tensor; a
		// tensor placed twice is the same bytes twice.
		"tensor split in two": func(l *formats.Layout) {
			l.Tensors[0].Size, l.Tensors[0].Shape = 3, []int64{3}
			l.Files[1].Extents[0].Tensor = 0
			l.Tensors = l.Tensors[:1]
		},
		"placed again, other bytes": func(l *formats.Layout) { l.Files[1].Extents[0].Tensor, l.Tensors[0].Size = 0, 1 },
	}
	again := good() // the same bytes placed twice is one tensor
	files["c"] = []byte{3, 4}
	again.Files = append(again.Files, formats.File{Path: "c", Size: 2, Extents: []formats.Extent{{Kind: formats.TensorData, Size: 2, Tensor: 0}}})
	if err := CheckLayout(again, files); err != nil {
		t.Errorf("a tensor placed twice with the same bytes: %v", err)
	}
	files["c"] = []byte{3, 5}
	if err := CheckLayout(again, files); err == nil {
		t.Error("a tensor placed twice with other bytes is accepted")
	}
	delete(files, "c")
	for name, spoil := range cases {
		l := good()
		spoil(l)
		if err := CheckLayout(l, files); err == nil {
			t.Errorf("%s: not found", name)
		}
	}
}

func TestMaterializeAndTensorData(t *testing.T) {
	l, _ := toyReplan(&formats.Layout{Tensors: []formats.Tensor{{Name: "t", DType: "U8", Shape: []int64{3}, Size: 3}}})
	files, err := Materialize(l, [][]byte{[]byte("abc")})
	if err != nil || string(files["out0.toy"]) != "\x03\x00\x00\x00abc" {
		t.Fatalf("Materialize: %q, %v", files["out0.toy"], err)
	}
	data, err := TensorData(l, files)
	if err != nil || string(data[0]) != "abc" {
		t.Fatalf("TensorData: %q, %v", data, err)
	}
	if _, err := Materialize(l, [][]byte{[]byte("ab")}); err == nil {
		t.Error("content of the wrong size accepted")
	}
	l.Files[0].Extents[0].Bytes = nil
	if _, err := Materialize(l, [][]byte{[]byte("abc")}); err == nil {
		t.Error("frame without bytes accepted")
	}
}

func TestMutationBudgets(t *testing.T) {
	small := formats.File{Size: 10}
	if got := truncationLengths(small, 512); len(got) != 10 || got[9] != 9 {
		t.Errorf("small file lengths %v", got)
	}
	big := formats.File{Size: 1 << 20, Extents: []formats.Extent{{Kind: formats.Frame, Size: 5000}, {Kind: formats.TensorData, Offset: 5000, Size: 1<<20 - 5000}}}
	got := truncationLengths(big, 256)
	if len(got) > 256+6 || len(got) < 200 {
		t.Errorf("%d lengths for a budget of 256", len(got))
	}
	for _, want := range []int{0, 4999, 5000, 5001, 1<<20 - 1} {
		found := false
		for _, n := range got {
			found = found || n == want
		}
		if !found {
			t.Errorf("length %d not tried", want)
		}
	}
	if pos := flipPositions(big, 100); len(pos) != 100 || pos[0] != 0 || pos[99] >= 5000 {
		t.Errorf("flip positions %d, first %d, last %d", len(pos), pos[0], pos[len(pos)-1])
	}
}

// withCompanion is toy whose layout also holds companion.dat, a file it
// was not passed, as ONNX holds the external data files its models name.
type withCompanion struct{ toy }

func (c withCompanion) Parse(dir formats.Dir, paths []string) (*formats.Layout, error) {
	l, err := c.toy.Parse(dir, paths)
	if err != nil {
		return nil, err
	}
	size, err := dir.Stat("companion.dat")
	if err != nil {
		return nil, err
	}
	l.Files = append(l.Files, formats.File{Path: "companion.dat", Size: size, Extents: []formats.Extent{{Kind: formats.Frame, Size: size}}})
	return l, nil
}

func TestSuiteAcceptsFilesFoundThroughClaimedOnes(t *testing.T) {
	Suite{Codec: withCompanion{}, Samples: []Sample{
		{Name: "companion", Files: map[string][]byte{"a.toy": toyFile("hello"), "companion.dat": []byte("side data")}},
	}}.Run(t)
}
