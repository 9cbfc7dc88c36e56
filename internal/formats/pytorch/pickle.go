package pytorch

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
)

// machine interprets a pickle without running anything: values are plain
// Go data (value.go), globals are looked up in the allowlist (globals.go)
// and never imported, and "calls" (REDUCE, NEWOBJ, BUILD) are the handful
// of torch constructors the allowlist describes, applied to checked
// arguments.
type machine struct {
	data  []byte
	pos   int
	base  int64 // offset of data in the file, for messages
	path  string
	lim   Limits
	stack []value
	marks []int // stack lengths at each open MARK
	memo  memo
	ids   int // identity counter for mutable values
	// kept is where the items of tuples and lists are cut from (keep):
	// each of a checkpoint's tensors is rebuilt from four tuples.
	kept []value

	// budget is charged for what the pickle makes the machine build
	// beyond its own bytes: strings, containers, dict keys spelled out.
	budget *formats.Budget

	// persistent resolves a BINPERSID id (a storage reference).
	persistent func(pid tuple, at int64) (value, error)
}

// unpickle runs data to its STOP and returns the one value it leaves.
// Bytes after STOP are refused.
func unpickle(data []byte, base int64, path string, lim Limits, budget *formats.Budget, persistent func(tuple, int64) (value, error)) (value, error) {
	m := &machine{data: data, base: base, path: path, lim: lim, budget: budget, persistent: persistent}
	if int64(len(data)) > lim.MaxPickleBytes {
		return nil, m.fail(errs.SizeLimitExceeded, 0, "data.pkl of %d bytes is over the %d-byte limit", len(data), lim.MaxPickleBytes)
	}
	return m.run()
}

func (m *machine) fail(class errs.Class, at int, format string, args ...any) error {
	return errs.At(class, pkg, m.path, m.base+int64(at), "data.pkl: "+format, args...)
}

// need returns the next n bytes, or fails with the pickle cut short.
func (m *machine) need(n int, at int) ([]byte, error) {
	if n < 0 || len(m.data)-m.pos < n {
		return nil, m.fail(errs.InvalidArchive, at, "pickle ends inside an opcode's argument")
	}
	b := m.data[m.pos : m.pos+n]
	m.pos += n
	return b, nil
}

// line reads a newline-terminated argument (GLOBAL's module and name).
func (m *machine) line(at int) (string, error) {
	for i := m.pos; i < len(m.data) && i-m.pos <= maxGlobalName; i++ {
		if m.data[i] == '\n' {
			s := string(m.data[m.pos:i])
			m.pos = i + 1
			if !utf8.ValidString(s) {
				return "", m.fail(errs.SchemaError, at, "global name %q is not UTF-8", s)
			}
			return s, nil
		}
	}
	if len(m.data)-m.pos > maxGlobalName {
		return "", m.fail(errs.SizeLimitExceeded, at, "global name longer than %d bytes", maxGlobalName)
	}
	return "", m.fail(errs.InvalidArchive, at, "pickle ends inside a global name")
}

// frame is the number of values above the innermost MARK.
func (m *machine) frame() int {
	if len(m.marks) == 0 {
		return len(m.stack)
	}
	return len(m.stack) - m.marks[len(m.marks)-1]
}

func (m *machine) push(v value, at int) error {
	if len(m.stack) >= m.lim.MaxStack {
		return m.fail(errs.SizeLimitExceeded, at, "more than %d values on the pickle stack", m.lim.MaxStack)
	}
	// The value's slot, on the stack and later in its container. A string
	// is charged where it is copied out of the pickle (str), not where the
	// memo shares it.
	if err := m.budget.Charge(16); err != nil {
		return err
	}
	m.stack = append(m.stack, v)
	return nil
}

// str pushes a string copied out of the pickle.
func (m *machine) str(b []byte, at int) error {
	if err := m.budget.Charge(int64(len(b))); err != nil {
		return err
	}
	return m.push(string(b), at)
}

func (m *machine) pop(op string, at int) (value, error) {
	if m.frame() < 1 {
		return nil, m.fail(errs.InvalidArchive, at, "%s needs a value, the stack has none", op)
	}
	v := m.stack[len(m.stack)-1]
	m.stack = m.stack[:len(m.stack)-1]
	return v, nil
}

func (m *machine) top(op string, at int) (*value, error) {
	if m.frame() < 1 {
		return nil, m.fail(errs.InvalidArchive, at, "%s needs a value, the stack has none", op)
	}
	return &m.stack[len(m.stack)-1], nil
}

// popMark removes the values above the innermost MARK, and the MARK, and
// returns them: a view of the stack, which the next push overwrites
// (keep makes a copy that lasts).
func (m *machine) popMark(op string, at int) ([]value, error) {
	if len(m.marks) == 0 {
		return nil, m.fail(errs.InvalidArchive, at, "%s without a MARK", op)
	}
	k := m.marks[len(m.marks)-1]
	m.marks = m.marks[:len(m.marks)-1]
	items := m.stack[k:len(m.stack):len(m.stack)]
	m.stack = m.stack[:k]
	return items, nil
}

// keptChunk is how many values keep cuts its copies from at once; a run
// longer than keptRun is allocated alone.
const (
	keptChunk = 4096
	keptRun   = 64
)

// keep returns a copy of items that lasts: short runs are cut from one
// chunk, so that a tuple's items are not an allocation each. A copy has
// no room to grow: an append to it (a list's) copies it first.
func (m *machine) keep(items []value) []value {
	n := len(items)
	switch {
	case n == 0:
		return nil
	case n > keptRun:
		return append([]value(nil), items...)
	case cap(m.kept)-len(m.kept) < n:
		m.kept = make([]value, 0, keptChunk)
	}
	start := len(m.kept)
	m.kept = append(m.kept, items...)
	return m.kept[start:len(m.kept):len(m.kept)]
}

func (m *machine) newID() int { m.ids++; return m.ids }

func (m *machine) run() (value, error) {
	for {
		at := m.pos
		if m.pos >= len(m.data) {
			return nil, m.fail(errs.InvalidArchive, at, "pickle ends without STOP")
		}
		op := m.data[m.pos]
		m.pos++
		name := opNames[op]
		if name == "" {
			return nil, m.fail(errs.InvalidArchive, at, "byte %#02x is not a pickle opcode", op)
		}
		if op == opStop {
			return m.stop(at)
		}
		if err := m.step(op, name, at); err != nil {
			return nil, err
		}
	}
}

func (m *machine) stop(at int) (value, error) {
	if len(m.marks) != 0 || len(m.stack) != 1 {
		return nil, m.fail(errs.InvalidArchive, at, "STOP with %d values and %d open MARKs on the stack, want one value", len(m.stack), len(m.marks))
	}
	if m.pos != len(m.data) {
		return nil, m.fail(errs.InvalidArchive, m.pos, "%d bytes after STOP (a second pickle, or garbage)", len(m.data)-m.pos)
	}
	return m.stack[0], nil
}

// step interprets one opcode other than STOP.
func (m *machine) step(op byte, name string, at int) error {
	le := binary.LittleEndian
	switch op {
	case opProto:
		b, err := m.need(1, at)
		if err != nil {
			return err
		}
		if b[0] > 5 {
			return m.fail(errs.UnsupportedVersion, at, "pickle protocol %d is newer than any this build knows (5)", b[0])
		}
		return nil
	case opMark:
		if len(m.marks) >= m.lim.MaxDepth {
			return m.fail(errs.SizeLimitExceeded, at, "MARKs nested deeper than %d", m.lim.MaxDepth)
		}
		m.marks = append(m.marks, len(m.stack))
		return nil
	case opNone:
		return m.push(none{}, at)
	case opNewTrue, opNewFalse:
		return m.push(op == opNewTrue, at)
	case opBinInt:
		b, err := m.need(4, at)
		if err != nil {
			return err
		}
		return m.push(int64(int32(le.Uint32(b))), at)
	case opBinInt1:
		b, err := m.need(1, at)
		if err != nil {
			return err
		}
		return m.push(int64(b[0]), at)
	case opBinInt2:
		b, err := m.need(2, at)
		if err != nil {
			return err
		}
		return m.push(int64(le.Uint16(b)), at)
	case opLong1:
		b, err := m.need(1, at)
		if err != nil {
			return err
		}
		if b, err = m.need(int(b[0]), at); err != nil {
			return err
		}
		return m.push(decodeLong(b), at)
	case opBinFloat:
		b, err := m.need(8, at)
		if err != nil {
			return err
		}
		return m.push(math.Float64frombits(binary.BigEndian.Uint64(b)), at)
	case opBinUnicode:
		b, err := m.need(4, at)
		if err != nil {
			return err
		}
		n := le.Uint32(b)
		if int64(n) > int64(len(m.data)-m.pos) {
			return m.fail(errs.InvalidArchive, at, "string of %d bytes passes the end of the pickle", n)
		}
		if b, err = m.need(int(n), at); err != nil {
			return err
		}
		if !utf8.Valid(b) {
			return m.fail(errs.SchemaError, at, "string is not valid UTF-8")
		}
		return m.str(b, at)
	case opShortBinString:
		b, err := m.need(1, at)
		if err != nil {
			return err
		}
		if b, err = m.need(int(b[0]), at); err != nil {
			return err
		}
		if !utf8.Valid(b) { // torch.load decodes Python 2 strings as UTF-8
			return m.fail(errs.SchemaError, at, "Python 2 string is not valid UTF-8")
		}
		return m.str(b, at)
	case opEmptyTuple:
		return m.push(tuple{}, at)
	case opEmptyList:
		return m.push(&list{id: m.newID()}, at)
	case opEmptyDict:
		return m.push(newDict(m.newID()), at)
	case opEmptySet:
		return m.push(&set{id: m.newID()}, at)
	case opTuple, opTuple1, opTuple2, opTuple3:
		return m.tuple(op, name, at)
	case opBinPut, opLongBinPut:
		return m.put(op, at)
	case opBinGet, opLongBinGet:
		return m.get(op, at)
	case opGlobal:
		return m.global(at)
	case opBinPersID:
		pid, err := m.pop(name, at)
		if err != nil {
			return err
		}
		t, ok := pid.(tuple)
		if !ok {
			return m.fail(errs.SchemaError, at, "persistent id is a %s, torch.save writes a tuple ('storage', …)", typeName(pid))
		}
		v, err := m.persistent(t, m.base+int64(at))
		if err != nil {
			return err
		}
		return m.push(v, at)
	case opReduce:
		return m.applyToTop(name, at, func(fn, args value) (value, error) { return m.reduce(fn, args, at) })
	case opNewObj:
		return m.applyToTop(name, at, func(cls, args value) (value, error) { return m.newObj(cls, args, at) })
	case opBuild:
		return m.applyToTop(name, at, func(inst, state value) (value, error) { return inst, m.build(inst, state, at) })
	case opAppend, opAppends, opSetItem, opSetItems:
		return m.fill(op, name, at)
	}
	return m.refuse(op, name, at)
}

// applyToTop pops an argument and replaces the value under it with
// f(value, argument): REDUCE, NEWOBJ and BUILD.
func (m *machine) applyToTop(name string, at int, f func(top, arg value) (value, error)) error {
	arg, err := m.pop(name, at)
	if err != nil {
		return err
	}
	top, err := m.top(name, at)
	if err != nil {
		return err
	}
	v, err := f(*top, arg)
	if err != nil {
		return err
	}
	*top = v
	return nil
}

func (m *machine) tuple(op byte, name string, at int) error {
	var items []value
	switch op {
	case opTuple:
		var err error
		if items, err = m.popMark(name, at); err != nil {
			return err
		}
	default:
		n := int(op-opTuple1) + 1
		if m.frame() < n {
			return m.fail(errs.InvalidArchive, at, "%s needs %d values, the stack has %d", name, n, m.frame())
		}
		items = m.stack[len(m.stack)-n:]
		m.stack = m.stack[:len(m.stack)-n]
	}
	t := newTuple(m.keep(items))
	if t.depth > m.lim.MaxDepth {
		return m.fail(errs.SizeLimitExceeded, at, "values nested deeper than %d", m.lim.MaxDepth)
	}
	return m.push(t, at)
}

func (m *machine) put(op byte, at int) error {
	var idx uint32
	if op == opBinPut {
		b, err := m.need(1, at)
		if err != nil {
			return err
		}
		idx = uint32(b[0])
	} else {
		b, err := m.need(4, at)
		if err != nil {
			return err
		}
		idx = binary.LittleEndian.Uint32(b)
	}
	v, err := m.top("PUT", at)
	if err != nil {
		return err
	}
	if !m.memo.put(idx, *v, m.lim.MaxMemo) {
		return m.fail(errs.SizeLimitExceeded, at, "more than %d memo entries", m.lim.MaxMemo)
	}
	return nil
}

func (m *machine) get(op byte, at int) error {
	var idx uint32
	if op == opBinGet {
		b, err := m.need(1, at)
		if err != nil {
			return err
		}
		idx = uint32(b[0])
	} else {
		b, err := m.need(4, at)
		if err != nil {
			return err
		}
		idx = binary.LittleEndian.Uint32(b)
	}
	v, ok := m.memo.get(idx)
	if !ok {
		return m.fail(errs.InvalidArchive, at, "memo entry %d is read before it is written", idx)
	}
	return m.push(v, at)
}

// global resolves GLOBAL "module\nname\n" against the allowlist; anything
// else is refused here, before it can be used.
func (m *machine) global(at int) error {
	module, err := m.line(at)
	if err != nil {
		return err
	}
	name, err := m.line(at)
	if err != nil {
		return err
	}
	g, err := lookupGlobal(module, name)
	if err != nil {
		return m.wrap(err, at)
	}
	return m.push(g, at)
}

// wrap places an error made without a position (by the allowlist) at the
// opcode that caused it.
func (m *machine) wrap(err error, at int) error {
	if e, ok := err.(*errs.Error); ok && e.Path == "" {
		return m.fail(e.Class, at, "%s", e.Msg)
	}
	return err
}

// fill interprets APPEND, APPENDS, SETITEM and SETITEMS: only lists take
// appends and only dicts take items, as in torch's weights_only loader.
func (m *machine) fill(op byte, name string, at int) error {
	var items []value
	var err error
	switch op {
	case opAppend:
		var v value
		if v, err = m.pop(name, at); err != nil {
			return err
		}
		items = []value{v}
	case opSetItem:
		if m.frame() < 2 {
			return m.fail(errs.InvalidArchive, at, "SETITEM needs a key and a value")
		}
		items = m.stack[len(m.stack)-2:] // read before the next push, as popMark's
		m.stack = m.stack[:len(m.stack)-2]
	default:
		if items, err = m.popMark(name, at); err != nil {
			return err
		}
	}
	target, err := m.top(name, at)
	if err != nil {
		return err
	}
	switch t := (*target).(type) {
	case *list:
		if op != opAppend && op != opAppends {
			return m.fail(errs.SchemaError, at, "%s on a list: only dicts take items", name)
		}
		for _, v := range items {
			t.depth = max(t.depth, depthOf(v)+1)
		}
		if t.depth > m.lim.MaxDepth {
			return m.fail(errs.SizeLimitExceeded, at, "values nested deeper than %d", m.lim.MaxDepth)
		}
		t.items = append(t.items, items...)
		return nil
	case *dict:
		if op != opSetItem && op != opSetItems {
			return m.fail(errs.SchemaError, at, "%s on a dict: only lists take appends", name)
		}
		if len(items)%2 != 0 {
			return m.fail(errs.InvalidArchive, at, "SETITEMS with an odd number of values")
		}
		for i := 0; i < len(items); i += 2 {
			if err := t.set(items[i], items[i+1], m.lim.MaxDepth, m.budget); err != nil {
				return m.wrap(err, at)
			}
		}
		return nil
	}
	return m.fail(errs.SchemaError, at, "%s on a %s: torch's safe loader only appends to lists and sets items of dicts", name, typeName(*target))
}

// refuse explains why a known opcode outside the allowed set is refused,
// naming the global it would reach when it reaches one.
func (m *machine) refuse(op byte, name string, at int) error {
	switch op {
	case opInst:
		module, err1 := m.line(at)
		cls, err2 := m.line(at)
		if err1 == nil && err2 == nil {
			return m.fail(errs.SchemaError, at, "opcode INST is not allowed: it would import and call %s.%s", module, cls)
		}
		return m.fail(errs.SchemaError, at, "opcode INST is not allowed: it imports and calls a class")
	case opObj:
		return m.fail(errs.SchemaError, at, "opcode OBJ is not allowed: it calls a class with arguments")
	case opStackGlobal:
		if m.frame() >= 2 {
			mod, ok1 := m.stack[len(m.stack)-2].(string)
			nm, ok2 := m.stack[len(m.stack)-1].(string)
			if ok1 && ok2 {
				return m.fail(errs.SchemaError, at, "opcode STACK_GLOBAL is not allowed: it would look up %s.%s", mod, nm)
			}
			return m.fail(errs.SchemaError, at, "opcode STACK_GLOBAL is not allowed (its operands are a %s and a %s, not a module and a name)",
				typeName(m.stack[len(m.stack)-2]), typeName(m.stack[len(m.stack)-1]))
		}
		return m.fail(errs.SchemaError, at, "opcode STACK_GLOBAL is not allowed: it looks up a global from the stack")
	case opExt1, opExt2, opExt4:
		return m.fail(errs.SchemaError, at, "opcode %s is not allowed: it looks up a global in the copyreg extension registry", name)
	case opPersID:
		return m.fail(errs.SchemaError, at, "opcode PERSID is not allowed: torch.save writes BINPERSID")
	}
	return m.fail(errs.SchemaError, at, "opcode %s is not allowed: torch's weights_only loader does not interpret it, and neither does mstore", name)
}

// decodeLong decodes a little-endian two's complement integer, as LONG1
// writes it; one that does not fit in 64 bits is kept opaque.
func decodeLong(b []byte) value {
	if len(b) > 8 {
		return bigInt{bytes: len(b)}
	}
	var u uint64
	for i := len(b) - 1; i >= 0; i-- {
		u = u<<8 | uint64(b[i])
	}
	if len(b) > 0 && len(b) < 8 && b[len(b)-1]&0x80 != 0 {
		u |= ^uint64(0) << (8 * len(b))
	}
	return int64(u)
}

func typeName(v value) string {
	switch v := v.(type) {
	case none:
		return "None"
	case bool:
		return "bool"
	case int64, bigInt:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []byte:
		return "bytes"
	case tuple:
		return "tuple"
	case *list:
		return "list"
	case *dict:
		return "dict"
	case *set:
		return "set"
	case *global:
		return v.String()
	case *storage:
		return "storage"
	case *tensor:
		return "tensor"
	}
	return fmt.Sprintf("%T", v)
}
