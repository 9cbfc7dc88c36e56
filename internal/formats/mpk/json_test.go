package mpk

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
)

func TestCheckJSON(t *testing.T) {
	cases := []struct {
		in    string
		depth int
		class errs.Class // 0: accepted
	}{
		{`{}`, 1, 0},
		{`[]`, 1, 0},
		{`"just a string"`, 0, 0},
		{`  {"a": [1, 2.5, -3e2, true, false, null, "x"]}  `, 2, 0},
		{`{"a": {"b": {}}}`, 3, 0},
		{`{"a": {"b": {}}}`, 2, errs.SizeLimitExceeded},
		{`[[[[]]]]`, 4, 0},
		{`[[[[]]]]`, 3, errs.SizeLimitExceeded},
		{`{"a": 1, "b": {"a": 2}}`, 8, 0}, // the same key in two objects
		{`{"a": 1, "a": 1}`, 8, errs.SchemaError},
		{`{"a": 1, "\u0061": 2}`, 8, errs.SchemaError}, // equal once unescaped
		{`[{"x": 1}, {"x": 1, "y": 2, "x": 3}]`, 8, errs.SchemaError},
		{`{"a": 1,}`, 8, errs.SchemaError},
		{`{"a" 1}`, 8, errs.SchemaError},
		{`{"a": 1`, 8, errs.SchemaError},
		{`]`, 8, errs.SchemaError},
		{`{} []`, 8, errs.SchemaError},
		{``, 8, errs.SchemaError},
		{"\ufeff{}", 8, errs.SchemaError}, // a byte order mark is not JSON
		{"{\"a\": \"\xff\"}", 8, errs.SchemaError},
		{`{"a": NaN}`, 8, errs.SchemaError},
	}
	for _, tc := range cases {
		_, p := checkJSON([]byte(tc.in), tc.depth, true)
		var got errs.Class
		if p != nil {
			got = p.class
		}
		if got != tc.class {
			t.Errorf("checkJSON(%q, depth %d): %v, want class %v", tc.in, tc.depth, p, tc.class.Key())
		}
	}
}

func TestCheckJSONKeepsValues(t *testing.T) {
	v, p := checkJSON([]byte(`{"a": [1, "x", {"b": null}], "c": true}`), 8, true)
	if p != nil {
		t.Fatal(p)
	}
	want := map[string]any{"a": []any{json.Number("1"), "x", map[string]any{"b": nil}}, "c": true}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("got %#v", v)
	}
	if v, p := checkJSON([]byte(`{"a": 1}`), 8, false); p != nil || v != nil {
		t.Errorf("without keep: %v %v", v, p)
	}
}

// TestCheckJSONDeepInputIsBounded: a depth far past the limit is refused
// at the limit, without recursing through the rest.
func TestCheckJSONDeepInputIsBounded(t *testing.T) {
	in := strings.Repeat("[", 1<<20) + strings.Repeat("]", 1<<20)
	if _, p := checkJSON([]byte(in), 64, false); p == nil || p.class != errs.SizeLimitExceeded || p.off > 100 {
		t.Errorf("got %v", p)
	}
}

func TestMemberNames(t *testing.T) {
	cases := []struct {
		raw  string
		dir  bool
		want string
		ok   bool
	}{
		{"a/b.so", false, "a/b.so", true},
		{"./a/b.so", false, "a/b.so", true},
		{"././a.so", false, "a.so", true},
		{"./", true, "", true},
		{".", true, "", true},
		{"model/", true, "model", true},
		{"a.so/", false, "", false}, // a regular file named like a directory
		{"a//b.so", false, "", false},
		{"a/./b.so", false, "", false},
		{"", false, "", false},
		{"/a.so", false, "", false},
		{"a/../b.so", false, "", false},
		{"..", true, "", false},
		{"C:a.so", false, "", false},
		{`a\b.so`, false, "", false},
		{"a\x00b.so", false, "", false},
		{"caf\u00e9/b.so", false, "caf\u00e9/b.so", true},
		{"a\u2044b.so", false, "", false},       // FRACTION SLASH
		{"\u2025/b.so", false, "", false},       // TWO DOT LEADER
		{"a\uff0eso", false, "a\uff0eso", true}, // a look-alike dot inside a name is not a dot segment
	}
	for _, tc := range cases {
		got, err := memberName(tc.raw, tc.dir)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("memberName(%q, %v) = %q, %v", tc.raw, tc.dir, got, err)
		}
		if err != nil && errs.ClassOf(err) != errs.PathTraversal {
			t.Errorf("memberName(%q): class %v", tc.raw, errs.ClassOf(err))
		}
	}
}

func TestTargets(t *testing.T) {
	for name, want := range map[string]string{
		"a/b/mpk.json": "etc/mpk.json", "x.so": "lib/x.so", "deep/m.elf": "share/m.elf",
		"x.JSON": "", "x.txt": "", ".so": "", "x.so.1": "", "x.elf.bak": "",
	} {
		got, err := Target(name)
		if got != want || (want == "") != (errs.ClassOf(err) == errs.SchemaError) {
			t.Errorf("Target(%q) = %q, %v", name, got, err)
		}
	}
	if _, err := Target("../x.so"); errs.ClassOf(err) != errs.PathTraversal {
		t.Errorf("Target of a traversal: %v", err)
	}
}
