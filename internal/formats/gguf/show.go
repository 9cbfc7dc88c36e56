package gguf

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

// ggufKVView is one key/value as show prints it: arrays are summarised by
// their element type, length and first elements.
type ggufKVView struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Elem  string `json:"elem,omitempty"`
	Count int    `json:"count,omitempty"` // arrays
	Value any    `json:"value,omitempty"` // scalars
	First []any  `json:"first,omitempty"` // the first elements of an array
}

type ggufFileView struct {
	Path      string       `json:"path"`
	Version   string       `json:"version"`
	Alignment string       `json:"alignment"`
	KV        []ggufKVView `json:"kv"`
}

const ggufFirstElems = 8

// maxShownTemplate is how much of a chat template show prints: real ones
// take a few KiB; a key/value of megabytes is summarised like an array.
const maxShownTemplate = 64 << 10

// Describe lists each GGUF file's key/values. The chat template is shown
// whole; other strings up to 200 bytes; arrays as type, length and first
// elements (a tokenizer's 150,000 tokens would drown everything else).
func (codec) Describe(m *objects.Manifest) (*formats.Details, error) {
	var blocks []formats.Block
	var views []ggufFileView
	for _, f := range m.Files {
		if f.Role != objects.RoleContainer || f.Meta[MetaKV] == "" {
			continue
		}
		kvs, _, err := manifestKVs(f)
		if err != nil {
			return nil, err
		}
		v := ggufFileView{Path: f.Path, Version: f.Meta[MetaVersion], Alignment: f.Meta[MetaAlignment]}
		blocks = append(blocks, formats.Line("key/values of %s (GGUF v%s, alignment %s):", formats.V(f.Path), formats.V(v.Version), formats.V(v.Alignment)))
		var rows [][]formats.Value
		for _, kv := range kvs {
			v.KV = append(v.KV, viewKV(kv))
			rows = append(rows, []formats.Value{formats.V(kv.Key), formats.V(typeLabel(kv.Value)), valueText(kv, true)})
		}
		blocks = append(blocks, formats.Table(2, rows...))
		views = append(views, v)
	}
	return &formats.Details{Blocks: blocks, Data: map[string]any{"files": views}}, nil
}

func viewKV(kv KV) ggufKVView {
	v := kv.Value
	out := ggufKVView{Key: kv.Key, Type: v.Type.String()}
	if !v.Array {
		out.Value = elem(v, 0)
		return out
	}
	out.Type, out.Elem, out.Count = "arr", v.Type.String(), v.Len()
	for i := range min(v.Len(), ggufFirstElems) {
		out.First = append(out.First, elem(v, i))
	}
	return out
}

// elem is element i of v as JSON shows it.
func elem(v Value, i int) any {
	switch v.Type {
	case TypeString:
		return v.Strs[i]
	case TypeBool:
		return v.Uint(i) != 0
	case TypeFloat32, TypeFloat64:
		f := v.Float(i)
		if math.IsNaN(f) || math.IsInf(f, 0) { // JSON has no number for them
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
		return f
	case TypeInt8, TypeInt16, TypeInt32, TypeInt64:
		return v.Int(i)
	}
	return v.Uint(i)
}

func typeLabel(v Value) string {
	if v.Array {
		return fmt.Sprintf("arr[%s,%d]", v.Type, v.Len())
	}
	return v.Type.String()
}

// valueText prints a value for people: strings quoted (the chat template
// whole, on its own lines, when full is set), arrays by their first
// elements.
func valueText(kv KV, full bool) formats.Value {
	v := kv.Value
	if v.Array {
		parts := make([]string, 0, ggufFirstElems+1)
		for i := range min(v.Len(), ggufFirstElems) {
			parts = append(parts, elemText(v, i, 40))
		}
		if v.Len() > ggufFirstElems {
			parts = append(parts, "…")
		}
		return formats.V("[" + strings.Join(parts, ", ") + "]")
	}
	if full && v.Type == TypeString && strings.HasPrefix(kv.Key, "tokenizer.chat_template") {
		tmpl, more := v.Strs[0], ""
		if len(tmpl) > maxShownTemplate {
			tmpl = strings.ToValidUTF8(tmpl[:maxShownTemplate], "")
			more = fmt.Sprintf("\n      … (%d more bytes: --json shows it whole)", len(v.Strs[0])-len(tmpl))
		}
		return formats.Value{S: fmt.Sprintf("(%d bytes)\n%s%s", len(v.Strs[0]), tmpl, more), Lines: true, Indent: 6}
	}
	return formats.V(elemText(v, 0, 200))
}

func elemText(v Value, i, limit int) string {
	switch v.Type {
	case TypeFloat32:
		return strconv.FormatFloat(v.Float(i), 'g', -1, 32)
	case TypeFloat64:
		return strconv.FormatFloat(v.Float(i), 'g', -1, 64)
	case TypeString:
	default:
		return fmt.Sprint(elem(v, i))
	}
	s := v.Strs[i]
	if len(s) > limit {
		return strconv.Quote(s[:limit]) + fmt.Sprintf("… (%d bytes)", len(s))
	}
	return strconv.Quote(s)
}

// ggufModelKVs gives each GGUF model of a version (a file, or the shards of
// a split, by prefix) its key/values, without the split keys.
func ggufModelKVs(m *objects.Manifest) (map[string][]modelKV, error) {
	out := map[string][]modelKV{}
	for _, f := range m.Files {
		if f.Role != objects.RoleContainer || f.Meta[MetaKV] == "" {
			continue
		}
		kvs, refs, err := manifestKVs(f)
		if err != nil {
			return nil, err
		}
		name := f.Path
		if prefix, _, n, ok := ShardOf(f.Path); ok && n > 1 {
			name = prefix + " (split)"
		}
		for i, kv := range kvs {
			if !IsSplitKey(kv.Key) {
				r, byRef := refs[i]
				out[name] = append(out[name], modelKV{KV: kv, byRef: byRef, frame: r.digest})
			}
		}
		if _, ok := out[name]; !ok {
			out[name] = []modelKV{}
		}
	}
	return out, nil
}

// modelKV is a key/value of a manifest; one kept by reference (byRef) holds
// its first elements and is compared by its frame's digest.
type modelKV struct {
	KV
	byRef bool
	frame objects.Digest
}

// same reports whether a and b are the same key/value, bit for bit.
func (a modelKV) same(b modelKV) bool {
	if !a.byRef && !b.byRef {
		return a.Value.Equal(b.Value)
	}
	return a.digest() == b.digest()
}

func (a modelKV) digest() objects.Digest {
	if a.byRef {
		return a.frame
	}
	return kvDigest(a.KV)
}

// ggufKVChange is one key/value that differs between two versions.
type ggufKVChange struct {
	Model  string `json:"model"`
	Key    string `json:"key"`
	Change string `json:"change"` // added, removed, changed
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
}

// Diff compares the key/values of two GGUF versions, model by model (a
// single model on each side is compared whatever its file name). Tensor
// changes are the generic diff's; this says whether the tokenizer and the
// hyper-parameters moved with them.
func (codec) Diff(a, b *objects.Manifest) (*formats.Details, error) {
	ka, err := ggufModelKVs(a)
	if err != nil {
		return nil, err
	}
	kb, err := ggufModelKVs(b)
	if err != nil {
		return nil, err
	}
	pairs := map[string][2][]modelKV{}
	if len(ka) == 1 && len(kb) == 1 {
		for na, va := range ka {
			for nb, vb := range kb {
				name := nb
				if na != nb {
					name = na + " → " + nb
				}
				pairs[name] = [2][]modelKV{va, vb}
			}
		}
	} else {
		for n, v := range ka {
			p := pairs[n]
			p[0] = v
			pairs[n] = p
		}
		for n, v := range kb {
			p := pairs[n]
			p[1] = v
			pairs[n] = p
		}
	}
	names := make([]string, 0, len(pairs))
	for n := range pairs {
		names = append(names, n)
	}
	sort.Strings(names)
	var changes []ggufKVChange
	unchanged, tokenizerChanged := 0, false
	for _, n := range names {
		c, same := diffKVs(n, pairs[n][0], pairs[n][1])
		changes = append(changes, c...)
		unchanged += same
		for _, ch := range c {
			tokenizerChanged = tokenizerChanged || strings.HasPrefix(ch.Key, "tokenizer.")
		}
	}
	count := map[string]int{"added": 0, "removed": 0, "changed": 0, "unchanged": unchanged}
	var blocks []formats.Block
	for _, c := range changes {
		count[c.Change]++
		switch c.Change {
		case "changed":
			blocks = append(blocks, formats.Line("~ kv     %s  %s → %s", formats.V(c.Key), formats.V(c.From), formats.V(c.To)))
		case "added":
			blocks = append(blocks, formats.Line("+ kv     %s  %s", formats.V(c.Key), formats.V(c.To)))
		default:
			blocks = append(blocks, formats.Line("- kv     %s  %s", formats.V(c.Key), formats.V(c.From)))
		}
	}
	last := fmt.Sprintf("key/values: %d added, %d removed, %d changed, %d unchanged", count["added"], count["removed"], count["changed"], unchanged)
	if !tokenizerChanged {
		last += "; the tokenizer key/values are unchanged"
	}
	blocks = append(blocks, formats.Line(strings.ReplaceAll(last, "%", "%%")))
	if changes == nil {
		changes = []ggufKVChange{}
	}
	return &formats.Details{Blocks: blocks, Data: map[string]any{"kv": changes, "kv_count": count, "tokenizer_changed": tokenizerChanged}}, nil
}

// diffKVs compares two key/value lists by key.
func diffKVs(model string, a, b []modelKV) (changes []ggufKVChange, unchanged int) {
	old := map[string]modelKV{}
	for _, kv := range a {
		old[kv.Key] = kv
	}
	seen := map[string]bool{}
	for _, kv := range b {
		seen[kv.Key] = true
		o, ok := old[kv.Key]
		switch {
		case !ok:
			changes = append(changes, ggufKVChange{Model: model, Key: kv.Key, Change: "added", To: summary(kv.KV)})
		case o.same(kv):
			unchanged++
		default:
			from, to := summary(o.KV), summary(kv.KV)
			if o.Value.Array && kv.Value.Array && o.Value.Type == kv.Value.Type && !o.byRef && !kv.byRef {
				to += fmt.Sprintf(" (first difference at [%d])", firstDifference(o.Value, kv.Value))
			}
			changes = append(changes, ggufKVChange{Model: model, Key: kv.Key, Change: "changed", From: from, To: to})
		}
	}
	for _, kv := range a {
		if !seen[kv.Key] {
			changes = append(changes, ggufKVChange{Model: model, Key: kv.Key, Change: "removed", From: summary(kv.KV)})
		}
	}
	return changes, unchanged
}

func summary(kv KV) string {
	return typeLabel(kv.Value) + " " + strings.ReplaceAll(valueText(kv, false).S, "\n", `\n`)
}

// firstDifference is the first index where two arrays of one type differ,
// compared by their bits (no text per element: arrays hold millions).
func firstDifference(a, b Value) int {
	n := min(a.Len(), b.Len())
	for i := range n {
		if a.Type == TypeString && a.Strs[i] != b.Strs[i] || a.Type != TypeString && a.Uint(i) != b.Uint(i) {
			return i
		}
	}
	return n
}
