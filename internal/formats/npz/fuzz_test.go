package npz_test

import (
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/npz"
)

// FuzzParse: any bytes, as an .npy or an .npz, are refused with a class or
// accepted with a consistent layout; never a panic. The seed corpus
// (testdata/fuzz/FuzzParse) holds numpy-written files; Plan's is added.
func FuzzParse(f *testing.F) {
	if gen, err := planned("w"); err == nil {
		f.Add(gen["model.npz"], true)
	}
	f.Add([]byte("\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }                                                     \n"), false)
	f.Fuzz(func(t *testing.T, b []byte, zipped bool) {
		name := "a.npy"
		if zipped {
			name = "a.npz"
		}
		files := map[string][]byte{name: b}
		l, err := npz.Codec.Parse(formattest.NewMemDir(files), []string{name})
		if err == nil && l.Files[0].Meta[formats.MetaCompression] != "" {
			files = map[string][]byte{name: decoded(t, files, name)}
		}
		if !formattest.CheckParsed(t, l, err, files) {
			return
		}
	})
}
