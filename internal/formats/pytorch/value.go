package pytorch

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
)

// value is what the unpickler builds: none, bool, int64, bigInt, float64,
// string, []byte, complexNum, tuple, *list, *dict, *set, *global, device,
// *storage or *tensor. Nothing else can exist, so nothing else can run.
type value any

type none struct{}

// bigInt is an integer too large for int64; its value is never needed.
type bigInt struct{ bytes int }

type complexNum struct{ re, im float64 }

// device is a torch.device, kept as its string ("cpu", "cuda:0").
type device string

// tuple is immutable; depth is 1 + the depth of its deepest element.
type tuple struct {
	items []value
	depth int
}

func newTuple(items []value) tuple {
	d := 0
	for _, v := range items {
		d = max(d, depthOf(v))
	}
	return tuple{items: items, depth: d + 1}
}

type list struct {
	id    int
	items []value
	depth int
}

type set struct {
	id    int
	items []value
	depth int
}

// dict keeps Python's semantics: insertion order, and a key set again
// keeps its place and takes the new value.
type dict struct {
	id    int
	keys  []value
	vals  []value
	index map[string]int
	depth int
}

func newDict(id int) *dict { return &dict{id: id} }

// set stores key → v. Keys must be hashable, as in Python.
func (d *dict) set(k, v value, maxDepth int, b *formats.Budget) error {
	h, err := hashKey(k, maxDepth, b)
	if err != nil {
		return err
	}
	if err := b.Charge(int64(len(h)) + 48); err != nil { // the index entry and the key/value slots
		return err
	}
	if dd := max(depthOf(k), depthOf(v)) + 1; dd > d.depth {
		if dd > maxDepth {
			return errs.New(errs.SizeLimitExceeded, pkg, "values nested deeper than %d", maxDepth)
		}
		d.depth = dd
	}
	if i, ok := d.index[h]; ok {
		d.vals[i] = v
		return nil
	}
	if d.index == nil { // most dicts (a tensor's backward hooks) stay empty
		d.index = map[string]int{}
	}
	d.index[h] = len(d.keys)
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	return nil
}

// depthOf is how deep v nests containers (0 for a scalar). Mutable
// containers record the depth of what was put in them when it was put.
func depthOf(v value) int {
	switch v := v.(type) {
	case tuple:
		return v.depth
	case *list:
		return max(v.depth, 1)
	case *dict:
		return max(v.depth, 1)
	case *set:
		return max(v.depth, 1)
	}
	return 0
}

// hashKey returns a string that is equal for two keys exactly when Python
// would find them equal (1, 1.0 and True are one key), or fails for an
// unhashable key. A key spelled out is as long as all it holds, and a
// tuple can hold one memo entry a million times: a first pass measures the
// spelling in a scratch buffer, stopping once it passes what is left of the
// budget, and only a key that fits is spelled, into one allocation.
func hashKey(k value, maxDepth int, budget *formats.Budget) (string, error) {
	room := int64(1 << 62)
	if budget != nil {
		room = budget.Limit() - budget.Used()
	}
	if s, ok := k.(string); ok { // a state dict's keys: spelled in one allocation
		n := int64(1+8) + int64(len(s))
		if n > room {
			return "", budget.Charge(n)
		}
		var length [8]byte
		binary.LittleEndian.PutUint64(length[:], uint64(len(s)))
		var b strings.Builder
		b.Grow(int(n))
		b.WriteByte('s')
		b.Write(length[:])
		b.WriteString(s)
		return b.String(), nil
	}
	var n int64
	b, err := appendKey(make([]byte, 0, 256), k, maxDepth, room, &n)
	n += int64(len(b))
	if errors.Is(err, errKeyTooLong) || err == nil && n > room {
		return "", budget.Charge(n)
	}
	if err != nil {
		return "", err
	}
	b, err = appendKey(make([]byte, 0, n), k, maxDepth, room, nil)
	return string(b), err
}

// errKeyTooLong stops a key's spelling at the budget.
var errKeyTooLong = errors.New("key too long")

// appendKey appends k's spelling to b. When measured is set, the bytes
// of b are added to it and dropped as the spelling goes (b is scratch).
func appendKey(b []byte, k value, depth int, room int64, measured *int64) ([]byte, error) {
	if depth < 0 {
		return nil, errs.New(errs.SizeLimitExceeded, pkg, "dict key nested too deeply")
	}
	if measured != nil {
		*measured += int64(len(b))
		b = b[:0]
		if *measured > room {
			return b, errKeyTooLong
		}
	}
	switch k := k.(type) {
	case none:
		return append(b, 'n'), nil
	case bool:
		if k {
			return append(b, 'i', '1', ';'), nil
		}
		return append(b, 'i', '0', ';'), nil
	case int64:
		return strconv.AppendInt(append(b, 'i'), k, 10), nil
	case float64:
		if k == math.Trunc(k) && math.Abs(k) < 1<<62 {
			return strconv.AppendInt(append(b, 'i'), int64(k), 10), nil
		}
		return binary.LittleEndian.AppendUint64(append(b, 'f'), math.Float64bits(k)), nil
	case string:
		b = binary.LittleEndian.AppendUint64(append(b, 's'), uint64(len(k)))
		return append(b, k...), nil
	case []byte:
		b = binary.LittleEndian.AppendUint64(append(b, 'b'), uint64(len(k)))
		return append(b, k...), nil
	case bigInt:
		return nil, errs.New(errs.SchemaError, pkg, "a dict key is an integer too large to compare")
	case complexNum:
		b = binary.LittleEndian.AppendUint64(append(b, 'c'), math.Float64bits(k.re))
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(k.im)), nil
	case device:
		return append(append(b, 'd'), k...), nil
	case *global:
		return append(append(b, 'g'), k.String()...), nil
	case *storage:
		return strconv.AppendInt(append(b, 'S'), int64(k.id), 10), nil
	case *tensor:
		return strconv.AppendInt(append(b, 'T'), int64(k.id), 10), nil
	case tuple:
		b = strconv.AppendInt(append(b, '('), int64(len(k.items)), 10)
		for _, v := range k.items {
			var err error
			if b, err = appendKey(append(b, ','), v, depth-1, room, measured); err != nil {
				return b, err
			}
		}
		return append(b, ')'), nil
	}
	return nil, errs.New(errs.SchemaError, pkg, "a dict key is a %s, which Python cannot hash", typeName(k))
}
