package pytorch

import (
	"fmt"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
)

// fuzzLimits are small, so that the fuzzer reaches them.
var fuzzLimits = Limits{MaxMembers: 64, MaxCentralDirectory: 1 << 16, MaxPickleBytes: 1 << 16, MaxMemo: 256,
	MaxStack: 1024, MaxDepth: 32, MaxNodes: 4096, MaxTensors: 256}

// FuzzUnpickle runs the unpickler and the naming of tensors over arbitrary
// data.pkl bytes, with storages data/0 … data/3 of 64 bytes: no input may
// panic, and every refusal has a class.
func FuzzUnpickle(f *testing.F) {
	f.Add(validPickle())
	f.Add(newPickle().dict().str("a").rebuild("FloatStorage", "0", 16, 0, []int64{4, 4}, []int64{1, 4}).
		str("b").rebuild("FloatStorage", "0", 16, 4, []int64{2}, []int64{2}).end())
	f.Add(call("os", "system", "id"))
	f.Add(newPickle().str("os").str("system").op(opStackGlobal).stop())
	f.Add(newPickle().op(opEmptyList, opBinPut, 0, opBinGet, 0, opAppend).stop())
	f.Add(planned(f, mixed[:3], PlanOptions{})[DefaultFile][128:400])
	f.Fuzz(func(t *testing.T, pkl []byte) {
		a := &archive{path: "f.pt", byRecord: map[string]*member{}}
		for i := range 4 {
			m := &member{name: fmt.Sprintf("archive/data/%d", i), record: fmt.Sprintf("data/%d", i), size: 64}
			a.members = append(a.members, m)
			a.byRecord[m.record] = m
		}
		c := &checkpoint{path: "f.pt", lim: fuzzLimits, arc: a}
		err := func() error {
			budget := formats.Limits{}.Budget(pkg, "f.pt", int64(len(pkl)))
			root, err := unpickle(pkl, 0, "f.pt", fuzzLimits, budget, c.persistent)
			if err != nil {
				return err
			}
			if err := c.name(root, fuzzLimits, budget); err != nil {
				return err
			}
			c.lay()
			return nil
		}()
		if err != nil && errs.ClassOf(err) == 0 {
			t.Fatalf("unclassified error: %v", err)
		}
		if err != nil {
			return
		}
		for _, v := range c.meta.Views {
			if size, err := v.Size(); err != nil || size > 1<<16 {
				continue // zero strides may repeat 64 bytes into a GiB: checked at parse, too slow here
			}
			if _, err := v.Gather(make([]byte, 64)); err != nil {
				t.Fatalf("view %+v of a checked tensor cannot be read: %v", v, err)
			}
		}
		if _, err := DecodeMeta(c.meta.encode()); err != nil {
			t.Fatalf("Meta does not decode: %v", err)
		}
	})
}

// FuzzParse parses arbitrary bytes as a checkpoint: no input may panic,
// every refusal has a class, and what is accepted has a consistent layout.
func FuzzParse(f *testing.F) {
	f.Add(checkpointOf(validPickle(), map[string][]byte{"0": f32(4)}))
	f.Add(viewsCheckpoint())
	f.Add(planned(f, mixed, PlanOptions{File: "m.pt"})["m.pt"])
	f.Add([]byte("abc"))
	if dir := testdataDir("pytorch"); dir != "" {
		files := realFiles(f, "pytorch")
		f.Add(files["candle-test.pt"])
		f.Add(files["candle-fortran_tensor_3d.pth"])
	}
	codec := CodecWith(fuzzLimits)
	f.Fuzz(func(t *testing.T, b []byte) {
		files := map[string][]byte{"m.pt": b}
		l, err := formattest.ParseRecovering(codec, files, []string{"m.pt"})
		switch {
		case err != nil && errs.ClassOf(err) == 0:
			t.Fatalf("unclassified error or panic: %v", err)
		case err != nil:
			checkDeferredRefusal(t, codec, b)
			return
		}
		if err := formattest.CheckLayout(l, files); err != nil {
			t.Fatalf("inconsistent layout: %v", err)
		}
		if _, err := DecodeMeta(l.Files[0].Meta); err != nil {
			t.Fatal(err)
		}
		checkDeferredParse(t, codec, b, l)
	})
}

// checkDeferredRefusal parses b, which a plain Dir's parse refused,
// through a Dir that defers the storages' CRC-32s: it may accept b only
// with a run whose CRC-32 is not its bytes', which its caller refuses.
func checkDeferredRefusal(t *testing.T, codec formats.Codec, b []byte) {
	t.Helper()
	d := &deferringDir{MemDir: formattest.NewMemDir(map[string][]byte{"m.pt": b}), read: map[int64]bool{}}
	got, err := func() (l *formats.Layout, err error) {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("the deferred parse panicked: %v", r)
			}
		}()
		return codec.Parse(d, []string{"m.pt"})
	}()
	switch {
	case err != nil && errs.ClassOf(err) == 0:
		t.Fatalf("the deferred parse: unclassified error %v", err)
	case err != nil:
		return
	}
	for _, c := range got.Files[0].CRC32Checks {
		if crc32.ChecksumIEEE(b[c.Offset:c.Offset+c.Size]) != c.Want {
			return // the add refuses it
		}
	}
	t.Fatal("accepted, with every CRC-32 right, when its CRC-32s are deferred, and refused otherwise")
}

// checkDeferredParse parses b, which a plain Dir's parse accepted as l,
// through a Dir that defers the storages' CRC-32s (an add's): it must
// accept it too, with l's layout and runs whose CRC-32s are b's.
func checkDeferredParse(t *testing.T, codec formats.Codec, b []byte, l *formats.Layout) {
	t.Helper()
	d := &deferringDir{MemDir: formattest.NewMemDir(map[string][]byte{"m.pt": b}), read: map[int64]bool{}}
	got, err := codec.Parse(d, []string{"m.pt"})
	if err != nil {
		t.Fatalf("refused when its CRC-32s are deferred: %v", err)
	}
	for _, c := range got.Files[0].CRC32Checks {
		if crc32.ChecksumIEEE(b[c.Offset:c.Offset+c.Size]) != c.Want {
			t.Fatalf("run %+v: not the CRC-32 of its bytes, which the plain parse compared", c)
		}
	}
	got.Files[0].CRC32Checks = nil
	if !reflect.DeepEqual(got, l) {
		t.Fatal("the deferred parse's layout is not the plain parse's")
	}
}
