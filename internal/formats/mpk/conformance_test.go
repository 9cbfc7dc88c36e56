package mpk_test

import (
	"bytes"
	"fmt"
	"path"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/mpk"
	"github.com/mstore/mstore/internal/formats/mpk/mpktest"
)

// tarView is the MPK loader seen through an uncompressed tar stream: it
// claims .tar files, gzips them with mpktest and lays them out with Load.
// Since a layout describes the tar stream, this is the view in which the
// conformance suite's truncations and bit flips reach the tar headers
// rather than the gzip checksum.
type tarView struct{}

func (tarView) Name() string         { return "mpk" }
func (tarView) Claims(p string) bool { return strings.HasSuffix(p, ".tar") }
func (tarView) Parse(dir formats.Dir, paths []string) (*formats.Layout, error) {
	if len(paths) != 1 {
		return nil, errs.New(errs.SchemaError, "tarview", "%d archives", len(paths))
	}
	f, err := dir.Open(paths[0])
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, f.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, errs.Wrap(errs.InvalidArchive, "tarview", err, "read")
	}
	a, err := mpk.Load(bytes.NewReader(mpktest.Gzip(b)), mpk.Options{})
	if err != nil {
		return nil, err
	}
	return a.Layout(path.Clean(paths[0])), nil
}

func TestConformance(t *testing.T) {
	sample := func(name string, entries []mpktest.Entry, opts mpktest.TarOptions) formattest.Sample {
		return formattest.Sample{Name: name, Files: map[string][]byte{"model.tar": mpktest.Tar(entries, opts), "README.md": []byte("not claimed")}}
	}
	// Each mutant is gzipped and loaded whole, so the budgets are smaller
	// than the suite's defaults (which are sized for header-only parsers).
	formattest.Suite{Codec: tarView{}, MaxTruncations: 128, MaxBitFlips: 1024, Samples: []formattest.Sample{
		sample("valid", validEntries(), mpktest.TarOptions{}),
		sample("trailing zero blocks", validEntries(), mpktest.TarOptions{Trailing: make([]byte, 4*mpktest.Block)}),
		sample("pax long name", plus(mpktest.Entry{Name: "long.so", Data: binary(4, 1024),
			PAX: map[string]string{"path": "model/" + strings.Repeat("d/", 60) + "libextra.so"}}), mpktest.TarOptions{}),
	}}.Run(t)
}

// TestCompressedMutations truncates the valid .tar.gz at every third length
// and flips every bit of a spread of its bytes: every
// result is refused with a class (or, rarely, still valid), never a panic.
func TestCompressedMutations(t *testing.T) {
	data := archive(validEntries())
	check := func(what string, b []byte) {
		t.Helper()
		_, err := loadRecovering(b)
		if err != nil && errs.ClassOf(err) == 0 {
			t.Errorf("%s: unclassified error: %v", what, err)
		}
	}
	step := 3
	if testing.Short() {
		step = 11
	}
	for n := 0; n < len(data); n += step {
		check("truncated", data[:n:n])
	}
	buf := bytes.Clone(data)
	for pos := 0; pos < len(buf); pos += max(1, step*len(buf)/384) {
		for bit := range 8 {
			buf[pos] ^= 1 << bit
			check("bit flip", buf)
			buf[pos] ^= 1 << bit
		}
	}
}

func loadRecovering(b []byte) (a *mpk.Archive, err error) {
	defer func() {
		if r := recover(); r != nil {
			a, err = nil, errPanic{r}
		}
	}()
	return mpk.Load(bytes.NewReader(b), mpk.Options{})
}

type errPanic struct{ v any }

func (e errPanic) Error() string { return fmt.Sprint("panic: ", e.v) }
