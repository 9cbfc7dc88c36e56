package pytorch

import (
	"strconv"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
)

// Limits bound what a checkpoint may make the reader allocate or do. Every
// one is checked before the allocation it guards.
type Limits struct {
	MaxMembers          int64 // zip members
	MaxCentralDirectory int64 // bytes of the zip's central directory
	MaxPickleBytes      int64 // bytes of data.pkl, which is read whole
	MaxMemo             int   // pickle memo entries
	MaxStack            int   // values on the pickle stack
	MaxDepth            int   // nesting of MARKs and of containers
	MaxNodes            int   // values visited when naming tensors
	MaxTensors          int   // state-dict tensors named
	// MaxParseMemory caps the parse budget (formats.Budget); zero is
	// formats.DefaultMaxParseMemory.
	MaxParseMemory int64
}

// DefaultLimits hold checkpoints of a million tensors.
var DefaultLimits = Limits{
	MaxMembers:          1 << 21,
	MaxCentralDirectory: 1 << 28,
	MaxPickleBytes:      1 << 30,
	MaxMemo:             1 << 24,
	MaxStack:            1 << 22,
	MaxDepth:            100,
	MaxNodes:            1 << 24,
	MaxTensors:          1 << 21,
}

const (
	maxGlobalName  = 1024 // bytes of a GLOBAL's module or name
	maxDims        = 1024 // dimensions of a tensor
	maxSmallRecord = 64   // bytes of version, byteorder, .format_version, .storage_alignment
	maxOtherNames  = 16   // names of non-tensor values kept for messages
	// maxRepeatedBytes bounds a tensor larger than its storage (zero
	// strides, as torch's expand() makes), which a conversion materialises.
	maxRepeatedBytes = 1 << 30
)

// checkpoint is one parsed .pt/.bin file.
type checkpoint struct {
	path     string
	lim      Limits
	arc      *archive
	storages []*storage // in order of first reference in data.pkl
	byKey    map[string]*storage
	named    []named // the state-dict tensors, in order
	other    Other   // values that are not tensors

	tensors []formats.Tensor // the file's Layout tensors, in order
	meta    FileMeta
	// crcs are the members whose CRC-32 the Dir's caller compares
	// (formats.DefersCRC32), left unread here.
	crcs []formats.CRC32Check
}

// readCheckpoint reads and checks one checkpoint file.
func readCheckpoint(dir formats.Dir, p string, lim Limits) (*checkpoint, error) {
	f, err := dir.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := f.Size()
	head := make([]byte, min(size, 512))
	if err := readAt(f, head, 0, p); err != nil {
		return nil, err
	}
	if len(head) < 4 || string(head[:4]) != "PK\x03\x04" && string(head[:4]) != "PK\x05\x06" && string(head[:4]) != "PK\x06\x06" {
		return nil, sniff(head, p)
	}
	r := newBlockReader(f, size)
	arc, err := readArchive(r, size, p, lim)
	if err != nil {
		return nil, err
	}
	c := &checkpoint{path: p, lim: lim, arc: arc}
	pkl, err := c.records(r)
	if err != nil {
		return nil, err
	}
	// The storages' CRC-32s: compared here, by reading every byte of
	// them, or by an add as it hashes the bytes it stores (which then
	// reads them once, not three times).
	deferred := formats.DefersCRC32(dir)
	var largest int64
	for _, m := range arc.members {
		largest = max(largest, m.size)
	}
	var buf []byte
	if !deferred {
		buf = make([]byte, min(largest, 1<<20))
	}
	for _, m := range arc.members {
		switch {
		case m.size <= maxSmallRecord || m.record == "data.pkl": // read whole, CRC checked
		case deferred:
			c.crcs = append(c.crcs, m.z.CRC32Check())
		default:
			if err := arc.checkCRC(r, m, buf); err != nil {
				return nil, err
			}
		}
	}
	// The parse reads data.pkl and the zip's central directory; what it
	// builds from them is charged to a budget proportional to their size.
	budget := formats.Limits{MaxParseMemory: lim.MaxParseMemory}.Budget(pkg, p, int64(len(pkl))+size-arc.cdStart)
	root, err := unpickle(pkl, arc.byRecord["data.pkl"].data, p, lim, budget, c.persistent)
	if err != nil {
		return nil, err
	}
	if err := c.name(root, lim, budget); err != nil {
		return nil, err
	}
	c.lay()
	return c, nil
}

// records checks the small records torch.save writes beside data.pkl and
// returns data.pkl (CRC checked).
func (c *checkpoint) records(r interface {
	ReadAt([]byte, int64) (int, error)
}) ([]byte, error) {
	a := c.arc
	small := map[string]string{}
	for _, m := range a.members {
		if m.size <= maxSmallRecord && !m.dir {
			b, err := a.read(r, m)
			if err != nil {
				return nil, err
			}
			small[m.record] = string(b)
		}
	}
	pkl := a.byRecord["data.pkl"]
	if pkl == nil {
		return nil, errs.At(errs.SchemaError, pkg, c.path, -1, "the archive has no %s/data.pkl, which every torch.save checkpoint holds", a.folder)
	}
	if pkl.size > c.lim.MaxPickleBytes {
		return nil, errs.At(errs.SizeLimitExceeded, pkg, c.path, pkl.data, "data.pkl of %d bytes is over the %d-byte limit", pkl.size, c.lim.MaxPickleBytes)
	}
	for _, rec := range []string{"version", ".data/version", "byteorder", ".format_version", ".storage_alignment"} {
		if m := a.byRecord[rec]; m != nil && m.size > maxSmallRecord {
			return nil, errs.At(errs.SchemaError, pkg, c.path, m.data, "%s of %d bytes: torch writes a few bytes here", m.name, m.size)
		}
	}
	version, ok := small["version"]
	if v, has := small[".data/version"]; has {
		version, ok = v, true
	}
	if !ok {
		return nil, errs.At(errs.SchemaError, pkg, c.path, -1, "the archive has no %s/version record", a.folder)
	}
	if n, err := strconv.Atoi(strings.TrimSuffix(version, "\n")); err != nil {
		return nil, errs.At(errs.SchemaError, pkg, c.path, -1, "version record %q is not a number", version)
	} else if n < 1 || n > 10 {
		return nil, errs.At(errs.UnsupportedVersion, pkg, c.path, -1, "archive format version %d: this build reads versions 1 to 10", n)
	}
	switch order, has := small["byteorder"]; {
	case !has || order == "little":
	case order == "big":
		return nil, errs.At(errs.UnsupportedVersion, pkg, c.path, -1, "this checkpoint was saved on a big-endian machine: its storages are big-endian, which mstore does not read")
	default:
		return nil, errs.At(errs.SchemaError, pkg, c.path, -1, "byteorder record %q is neither little nor big", order)
	}
	if v, has := small[".format_version"]; has {
		if n, err := strconv.Atoi(v); err != nil {
			return nil, errs.At(errs.SchemaError, pkg, c.path, -1, ".format_version record %q is not a number", v)
		} else if n != 1 {
			return nil, errs.At(errs.UnsupportedVersion, pkg, c.path, -1, "serialization format version %d: this build reads version 1", n)
		}
	}
	if v, has := small[".storage_alignment"]; has {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			return nil, errs.At(errs.SchemaError, pkg, c.path, -1, ".storage_alignment record %q is not a positive number", v)
		}
	}
	if pkl.size <= maxSmallRecord {
		return []byte(small["data.pkl"]), nil
	}
	return a.read(r, pkl) // bounded above
}

// persistent resolves a persistent id ('storage', class, key, location,
// numel) to the storage data/KEY, as torch.load's persistent_load does.
func (c *checkpoint) persistent(pid tuple, at int64) (value, error) {
	bad := func(class errs.Class, format string, args ...any) (value, error) {
		return nil, errs.At(class, pkg, c.path, at, "data.pkl: persistent id: "+format, args...)
	}
	items := pid.items
	if len(items) == 0 {
		return bad(errs.SchemaError, "empty tuple")
	}
	kind, _ := items[0].(string)
	if b, ok := items[0].([]byte); ok {
		kind = string(b)
	}
	if kind != "storage" {
		return bad(errs.SchemaError, "of kind %v: only storages may be loaded", describe(items[0]))
	}
	if len(items) != 5 {
		return bad(errs.SchemaError, "has %d fields, want ('storage', class, key, location, numel)", len(items))
	}
	class, ok := items[1].(*global)
	if !ok || class.kind != kindStorageType {
		return bad(errs.SchemaError, "storage class is a %s, not a torch storage class", typeName(items[1]))
	}
	if class.dtype == "" {
		return bad(errs.UnsupportedVersion, "%s: %s", class, class.why)
	}
	var key string
	switch k := items[2].(type) {
	case string:
		key = k
	case int64:
		key = strconv.FormatInt(k, 10)
	default:
		return bad(errs.SchemaError, "storage key is a %s, not a string", typeName(items[2]))
	}
	location, ok := items[3].(string)
	if b, isBytes := items[3].([]byte); isBytes {
		location, ok = string(b), true
	}
	if !ok {
		return bad(errs.SchemaError, "location is a %s, not a string", typeName(items[3]))
	}
	n, ok := items[4].(int64)
	if !ok || n < 0 {
		return bad(errs.SchemaError, "element count %v is not a non-negative int", describe(items[4]))
	}
	record := "data/" + key
	if strings.Contains(key, "/") || !formats.IsMemberPath(record) {
		return bad(errs.PathTraversal, "storage key %q does not name a member inside data/", key)
	}
	if st := c.byKey[key]; st != nil {
		if st.class != class || st.numel != n {
			return bad(errs.SchemaError, "storage %s is declared as %d × %s and again as %d × %s", record, st.numel, st.class.name, n, class.name)
		}
		return st, nil
	}
	m := c.arc.byRecord[record]
	if m == nil {
		return bad(errs.SchemaError, "data.pkl refers to storage %s, which the archive does not hold", record)
	}
	elem := elemSizes[class.dtype]
	if n > m.size/elem || n*elem != m.size {
		return bad(errs.SchemaError, "storage %s declares %d elements of %d bytes, but %s holds %d bytes", record, n, elem, m.name, m.size)
	}
	if len(c.storages) >= int(c.lim.MaxMembers) {
		return bad(errs.SizeLimitExceeded, "more than %d storages", c.lim.MaxMembers)
	}
	st := &storage{id: len(c.storages) + 1, key: key, m: m, class: class, dtype: class.dtype, elem: elem, numel: n, location: location, owner: -1}
	c.storages = append(c.storages, st)
	if c.byKey == nil {
		c.byKey = make(map[string]*storage, len(c.arc.members)) // a storage a member, at most
	}
	c.byKey[key] = st
	return st, nil
}
