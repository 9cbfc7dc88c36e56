package refs

import (
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
)

func TestParseNameAccepts(t *testing.T) {
	for _, s := range []string{
		"qwen2.5-0.5b",
		"acme/llama-ft",
		"Qwen/Qwen2.5-0.5B",
		"a",
		"0",
		"deadbeef",
		"a/b/c/d",
		"x_y-z.w",
		"v1.2.3",
		"a.b/c.d",
		"A-",
		"model.",
		strings.Repeat("a", MaxNameLen),
		strings.Repeat("ab/", 66) + "ab", // 200 bytes
	} {
		t.Run(s, func(t *testing.T) {
			got, err := ParseName(s)
			if err != nil || got != s {
				t.Fatalf("ParseName(%q) = %q, %v", s, got, err)
			}
			if !ValidName(s) {
				t.Fatal("ValidName disagrees")
			}
		})
	}
}

func TestParseNameRefuses(t *testing.T) {
	for _, tc := range []struct{ name, in, why string }{
		{"empty", "", "empty"},
		{"too long", strings.Repeat("a", MaxNameLen+1), "200"},
		{"leading slash", "/a", "starts with '/'"},
		{"trailing slash", "a/", "ends with '/'"},
		{"double slash", "a//b", "empty component"},
		{"dot", ".", "must start"},
		{"dotdot", "..", "must start"},
		{"dotdot component", "a/../b", "must start"},
		{"dotdot inside", "a..b", `".."`},
		{"dotdot end", "a/b..", `".."`},
		{"leading dot", ".hidden", "must start"},
		{"leading dash", "-rf", "must start"},
		{"leading underscore", "_x", "must start"},
		{"at", "a@b", `"@"`},
		{"colon", "a:b", `":"`},
		{"tilde", "a~1", `"~"`},
		{"space", "a b", `" "`},
		{"backslash", `a\b`, `"\\"`},
		{"nul", "a\x00b", `"\x00"`},
		{"non-ascii", "modèle", `"\xc3"`},
		{"plus", "a+b", `"+"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseName(tc.in)
			wantClass(t, err, errs.SchemaError, tc.why)
			if ValidName(tc.in) {
				t.Fatal("ValidName disagrees")
			}
		})
	}
}

func TestParseTag(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"v1", true},
		{"latest", true},
		{"_private", true},
		{"1.0.0-rc.1", true},
		{"a..b", true}, // tags are not paths
		{"A_b-C.d", true},
		{strings.Repeat("t", MaxTagLen), true},
		{strings.Repeat("t", MaxTagLen+1), false},
		{"", false},
		{".v1", false},
		{"-v1", false},
		{"v/1", false},
		{"v:1", false},
		{"v@1", false},
		{"v~1", false},
		{"v 1", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			_, err := ParseTag(tc.in)
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok {
				wantClass(t, err, errs.SchemaError, "tag")
			}
			if ValidTag(tc.in) != tc.ok {
				t.Fatal("ValidTag disagrees")
			}
		})
	}
}
