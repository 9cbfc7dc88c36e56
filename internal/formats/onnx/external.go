package onnx

import (
	"errors"
	"math"
	"path"
	"sort"
	"strconv"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
)

// extRef is where an external tensor's bytes are, as its external_data
// entries say.
type extRef struct {
	location  string
	offset    int64
	length    int64
	hasLength bool
	checksum  string
	hasSum    bool
	at        int64 // the first entry, for errors
}

// externalRef reads a tensor's external_data key/value entries. The keys
// are those of onnx's external_data_helper and of ONNX Runtime: location
// (required), offset, length, checksum; each at most once. Numbers are
// decimal digits only.
func (w *walker) externalRef(entries []field) (*extRef, error) {
	ref := &extRef{}
	seen := map[string]bool{}
	for i, e := range entries {
		if i == 0 {
			ref.at = e.at
		}
		var key, value string
		var hasKey, hasValue bool
		err := w.fields(e.val, e.end, func(g field) error {
			var err error
			switch g.num {
			case entryKey:
				key, err = w.str(g, "external_data key")
				hasKey = true
			case entryValue:
				value, err = w.str(g, "external_data value")
				hasValue = true
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if !hasKey || !hasValue {
			return nil, w.fail(errs.SchemaError, e.at, "external_data entry without a key or a value")
		}
		if seen[key] {
			return nil, w.fail(errs.SchemaError, e.at, "external_data key %q given twice", key)
		}
		seen[key] = true
		switch key {
		case "location":
			ref.location = value
		case "offset":
			ref.offset, err = parseNumber(value)
		case "length":
			ref.length, err = parseNumber(value)
			ref.hasLength = true
		case "checksum":
			ref.checksum, ref.hasSum = value, true
		default:
			return nil, w.fail(errs.SchemaError, e.at, "unknown external_data key %q (known: location, offset, length, checksum)", key)
		}
		if err != nil {
			return nil, w.fail(errs.SchemaError, e.at, "external_data %s %q is not a non-negative decimal number", key, value)
		}
	}
	if !seen["location"] {
		return nil, w.fail(errs.SchemaError, ref.at, "external_data without a location")
	}
	return ref, nil
}

var errNotNumber = errors.New("not a number")

// parseNumber accepts decimal digits only: no sign, no spaces, no hex.
func parseNumber(s string) (int64, error) {
	if s == "" {
		return 0, errNotNumber
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errNotNumber
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errNotNumber
	}
	return n, nil
}

// dataFile is one external data file and the tensors it holds.
type dataFile struct {
	path  string
	size  int64
	parts []dataPart
}

type dataPart struct {
	tensor int // index into the layout's tensors
	offset int64
	size   int64
	from   string // the .onnx that names it, for errors
	at     int64
}

// resolvePath returns the data file a location names, relative to the
// model's root: locations are relative to the .onnx file's folder, and must
// stay inside it (formats.IsMemberPath).
func resolvePath(onnxPath string, ref *extRef) (string, error) {
	if !formats.IsMemberPath(ref.location) {
		return "", errs.At(errs.PathTraversal, pkg, onnxPath, ref.at, "external data location %q leaves the model directory", ref.location)
	}
	p := path.Join(path.Dir(onnxPath), ref.location)
	if !formats.IsMemberPath(p) {
		return "", errs.At(errs.PathTraversal, pkg, onnxPath, ref.at, "external data location %q leaves the model directory", ref.location)
	}
	return p, nil
}

// checkDataFile stats a data file through dir and checks that its parts
// lie inside it without overlapping. A missing file or a part past its end
// is invalid_archive: a reader would otherwise see zeros or garbage (the
// seeds' anti-pattern AP-4). A file with more than one hard link is
// path_traversal: the link may lead out of the model directory.
func checkDataFile(dir formats.Dir, f *dataFile) error {
	size, err := dir.Stat(f.path)
	switch {
	case errs.ClassOf(err) == errs.NotFound:
		p := f.parts[0]
		return errs.At(errs.InvalidArchive, pkg, p.from, p.at, "external data file %s is missing", f.path)
	case err != nil:
		return err
	}
	if lc, ok := dir.(formats.LinkCounter); ok {
		n, err := lc.Links(f.path)
		if err != nil {
			return err
		}
		if n > 1 {
			return errs.New(errs.PathTraversal, pkg, "external data file %s has %d hard links; a hard link can bring in a file from outside the model directory", f.path, n)
		}
	}
	f.size = size
	sort.SliceStable(f.parts, func(i, j int) bool { return f.parts[i].offset < f.parts[j].offset })
	var end int64
	for i, p := range f.parts {
		if p.offset > math.MaxInt64-p.size || p.offset+p.size > size {
			return errs.At(errs.InvalidArchive, pkg, p.from, p.at, "external data %s: bytes %d..%d pass the end of the file (%d bytes)", f.path, p.offset, uint64(p.offset)+uint64(p.size), size)
		}
		if i > 0 && p.offset < end {
			return errs.At(errs.InvalidArchive, pkg, p.from, p.at, "external data %s: bytes %d..%d overlap another tensor's", f.path, p.offset, p.offset+p.size)
		}
		end = p.offset + p.size
	}
	return nil
}

// extents cuts the data file into its tensors and the frame bytes between
// them (stale data, padding), so that it comes back byte for byte.
func (f *dataFile) extents() []formats.Extent {
	var out []formats.Extent
	var off int64
	for _, p := range f.parts {
		if p.offset > off {
			out = append(out, formats.Extent{Kind: formats.Frame, Offset: off, Size: p.offset - off})
		}
		out = append(out, formats.Extent{Kind: formats.TensorData, Offset: p.offset, Size: p.size, Tensor: p.tensor})
		off = p.offset + p.size
	}
	if off < f.size {
		out = append(out, formats.Extent{Kind: formats.Frame, Offset: off, Size: f.size - off})
	}
	return out
}
