package npz

import (
	"encoding/json"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/zipfile"
)

// Codec is the NumPy codec.
var Codec formats.Codec = codec{}

type codec struct{ limits formats.Limits }

// MetaFortran is the File.Meta key listing (a JSON array) the tensors of
// the file whose data is in Fortran (column-major) order.
const MetaFortran = "npz.fortran"

// Bounds on an .npz's zip directory.
var zipLimits = zipfile.Limits{MaxMembers: 1 << 20, MaxCentralDirectory: 1 << 28}

// WithLimits returns the codec with the user's cap on the parse budget.
func (codec) WithLimits(l formats.Limits) formats.Codec { return codec{limits: l} }

// Name is the format's key in manifests.
func (codec) Name() string { return "npz" }

// Claims reports whether p is an .npy or .npz file.
func (codec) Claims(p string) bool {
	ext := strings.ToLower(path.Ext(p))
	return ext == ".npy" || ext == ".npz"
}

// Parse reads the .npy and .npz files among paths (in path order) and
// returns their layout; tensor names are the .npy files' paths, or the
// .npz members' names, without ".npy" (numpy.load's keys). Every .npz
// member's CRC-32 is checked.
func (c codec) Parse(dir formats.Dir, paths []string) (*formats.Layout, error) {
	l := &formats.Layout{Format: Codec.Name()}
	fileOf := map[string]string{}
	for _, p := range paths {
		f, err := c.parseFile(dir, p, l)
		if err != nil {
			return nil, err
		}
		for _, e := range f.Extents {
			if e.Kind != formats.TensorData {
				continue
			}
			name := l.Tensors[e.Tensor].Name
			if other, dup := fileOf[name]; dup {
				return nil, errs.At(errs.SchemaError, pkg, p, e.Offset, "array %q is also in %s", name, other)
			}
			fileOf[name] = p
		}
		l.Files = append(l.Files, *f)
	}
	return l, nil
}

func (c codec) parseFile(dir formats.Dir, p string, l *formats.Layout) (*formats.File, error) {
	f, err := dir.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := f.Size()
	out := &formats.File{Path: p, Size: size}
	var fortran []string
	budget := c.limits.Budget(pkg, p, 0)
	// add records an array whose header starts at off (its data at off +
	// header) and the frame before it, from at.
	at := int64(0)
	add := func(name string, a *array, off int64) error {
		if err := budget.ChargeString(name); err != nil {
			return err
		}
		if err := budget.Charge(int64(len(a.shape))*8 + 64); err != nil {
			return err
		}
		data := off + a.header
		out.Extents = append(out.Extents, formats.Extent{Kind: formats.Frame, Offset: at, Size: data - at},
			formats.Extent{Kind: formats.TensorData, Offset: data, Size: a.dataSize, Tensor: len(l.Tensors)})
		l.Tensors = append(l.Tensors, formats.Tensor{Name: name, DType: a.dtype, Shape: a.shape, Size: a.dataSize})
		if a.fortran && len(a.shape) > 1 {
			fortran = append(fortran, name)
		}
		at = data + a.dataSize
		return nil
	}
	// readNPY parses the .npy header at off, in a region of limit bytes.
	readNPY := func(off, limit int64) (*array, error) {
		need := func(n int64) ([]byte, error) {
			if n > limit {
				return nil, errs.At(errs.InvalidArchive, pkg, p, off+limit, "the .npy header runs past the end of the array's %d bytes", limit)
			}
			b := make([]byte, n)
			return b, zipfile.ReadAt(f, b, off, pkg, p)
		}
		head, err := need(min(limit, 12))
		if err != nil {
			return nil, err
		}
		budget.ReadTo(min(limit, maxHeader))
		a, err := parseNPY(head, need, p)
		if err != nil {
			return nil, err
		}
		if a.header+a.dataSize != limit {
			class := errs.SchemaError
			if a.header+a.dataSize > limit {
				class = errs.InvalidArchive // cut short
			}
			return nil, errs.At(class, pkg, p, off, "the array holds %d bytes after its header, and its dtype %s and shape %v make %d", limit-a.header, a.descr, a.shape, a.dataSize)
		}
		return a, nil
	}

	if strings.EqualFold(path.Ext(p), ".npy") {
		a, err := readNPY(0, size)
		if err != nil {
			return nil, err
		}
		if err := add(strings.TrimSuffix(p, path.Ext(p)), a, 0); err != nil {
			return nil, err
		}
	} else {
		members, err := scan(io.NewSectionReader(f, 0, size), size, p, nil)
		if err != nil {
			return nil, err
		}
		// Room for what add appends per member (members are bounded by the
		// scan's limits): an .npz of 100,000 arrays grew these by doubling.
		out.Extents = slices.Grow(out.Extents, 2*len(members)+1)
		l.Tensors = slices.Grow(l.Tensors, len(members))
		deflated := slices.ContainsFunc(members, func(m *member) bool { return m.z.Method == zipfile.Deflate })
		cursor := int64(0) // in the decoded stream
		for _, m := range members {
			off := m.z.Data // stored: the .npy lies in the file as it is
			if deflated {
				off = cursor + int64(len(record(m)))
				cursor = off + m.z.USize
			}
			if m.a == nil {
				continue
			}
			if err := add(strings.TrimSuffix(m.z.Name, ".npy"), m.a, off); err != nil {
				return nil, err
			}
		}
		if deflated {
			size = cursor + trailerSize
			out.Size, out.Meta = size, map[string]string{formats.MetaCompression: Compression}
		}
	}
	if at < size {
		out.Extents = append(out.Extents, formats.Extent{Kind: formats.Frame, Offset: at, Size: size - at})
	}
	if len(fortran) > 0 {
		b, _ := json.Marshal(fortran)
		if out.Meta == nil {
			out.Meta = map[string]string{}
		}
		out.Meta[MetaFortran] = string(b)
	}
	return out, nil
}
