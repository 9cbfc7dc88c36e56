package archiver

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/testmodel"
)

// readAll reads a parser's way through dir: the size of a.bin, its first
// 8 bytes then the next 100, 20 bytes at 900 (past its end), and the size
// of b.bin.
func readAll(t *testing.T, dir formats.Dir) {
	t.Helper()
	f, err := dir.Open("a.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, r := range []struct{ off, n int64 }{{0, 8}, {8, 100}, {900, 20}} {
		f.ReadAt(make([]byte, r.n), r.off)
	}
	dir.Stat("b.bin")
}

// TestReadLogReplay: the answers a parse got are asked again, and any
// change of what it read (a byte, a size, the end of a file) is a
// difference; bytes it did not read are not.
func TestReadLogReplay(t *testing.T) {
	a := bytes.Repeat([]byte("0123456789"), 91) // 910 bytes: the read at 900 is short
	b := []byte("b")
	log := newReadLog(formattest.NewMemDir(map[string][]byte{"a.bin": a, "b.bin": b}))
	readAll(t, log)
	// The header-like reads of 8 then 100 bytes are one ask.
	if len(log.asks) != 4 {
		t.Fatalf("%d asks, want 4 (open, one read of 108 bytes, the short read, stat): %+v", len(log.asks), log.asks)
	}
	with := func(p string, change func([]byte) []byte) formats.Dir {
		files := map[string][]byte{"a.bin": bytes.Clone(a), "b.bin": bytes.Clone(b)}
		files[p] = change(files[p])
		return formattest.NewMemDir(files)
	}
	same := func(c []byte) []byte { return c }
	flip := func(i int) func([]byte) []byte { return func(c []byte) []byte { c[i] ^= 1; return c } }
	for _, c := range []struct {
		name string
		dir  formats.Dir
		want bool
	}{
		{"unchanged", with("a.bin", same), true},
		{"a byte never read", with("a.bin", flip(500)), true},
		{"the length", with("a.bin", flip(3)), false},
		{"the body", with("a.bin", flip(107)), false},
		{"the short read", with("a.bin", flip(905)), false},
		{"a longer file", with("a.bin", func(c []byte) []byte { return append(c, 'x') }), false},
		{"the size of a file opened only for its size", with("b.bin", func(c []byte) []byte { return append(c, 'x') }), false},
		{"a file gone", formattest.NewMemDir(map[string][]byte{"b.bin": b}), false},
	} {
		if got := log.replay(c.dir); got != c.want {
			t.Errorf("%s: replay says same %v, want %v", c.name, got, c.want)
		}
	}
}

// firstByteCodec lays out a file as one frame and keeps its first byte
// as metadata; it reads the whole file, and so depends on its first byte
// only.
type firstByteCodec struct{}

func (firstByteCodec) Name() string         { return "firstbyte" }
func (firstByteCodec) Claims(p string) bool { return strings.HasSuffix(p, ".fb") }
func (firstByteCodec) Parse(dir formats.Dir, paths []string) (*formats.Layout, error) {
	l := &formats.Layout{Format: "firstbyte"}
	for _, p := range paths {
		f, err := dir.Open(p)
		if err != nil {
			return nil, err
		}
		b := make([]byte, f.Size())
		_, err = f.ReadAt(b, 0)
		f.Close()
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("firstbyte: %s: %v", p, err)
		}
		l.Files = append(l.Files, formats.File{Path: p, Size: f.Size(), Meta: map[string]string{"first": string(b[:1])},
			Extents: []formats.Extent{{Kind: formats.Frame, Size: f.Size()}}})
	}
	return l, nil
}

// TestVerifyParsesAgainWhenAReadDiffers: when a byte the codec read is
// not the one stored, the stored bytes are parsed again; they are taken
// when they parse to the same layout (the codec did not depend on that
// byte) and refused with integrity_error when they do not.
func TestVerifyParsesAgainWhenAReadDiffers(t *testing.T) {
	orig := []byte("abcdefgh")
	for _, c := range []struct {
		name      string
		rewritten string
		refused   bool
	}{{"a byte the layout does not depend on", "abcdefgX", false}, {"the byte the layout keeps", "Xbcdefgh", true}} {
		rw := testmodel.Rewrite{File: "m.fb", Original: orig, Rewritten: []byte(c.rewritten)}
		parses, err := stageRewritten(t, rw, "parsed", firstByteCodec{})
		if parses != 1 {
			t.Errorf("%s: parsed again %d times, want 1", c.name, parses)
		}
		switch {
		case c.refused && (errs.ClassOf(err) != errs.IntegrityError || !strings.Contains(err.Error(), "another layout")):
			t.Errorf("%s: %v, want integrity_error naming another layout", c.name, err)
		case !c.refused && err != nil:
			t.Errorf("%s: %v, want it taken", c.name, err)
		}
	}
	if parses, err := stageRewritten(t, testmodel.Rewrite{File: "m.fb", Original: orig}, "", firstByteCodec{}); parses != 0 || err != nil {
		t.Errorf("unchanged: %v, parsed again %d times; want no error, no parse", err, parses)
	}
}
