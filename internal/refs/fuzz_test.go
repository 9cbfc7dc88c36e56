package refs

import (
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// checkNameShape fails if a name ParseName accepted breaks a promise the rest
// of mstore relies on.
func checkNameShape(t *testing.T, name string) {
	t.Helper()
	if strings.Contains(name, "..") || strings.ContainsAny(name, "@:~\\\x00") ||
		strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "//") ||
		len(name) == 0 || len(name) > MaxNameLen {
		t.Fatalf("accepted name %q breaks the grammar", name)
	}
	if !objects.IsCleanPath(name) {
		t.Fatalf("accepted name %q is not a clean relative path", name)
	}
}

func FuzzParseName(f *testing.F) {
	for _, s := range []string{"qwen2.5-0.5b", "acme/llama-ft", "a/../b", "a..b", "/a", "a//b", "a:b", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, err := ParseName(s)
		if err != nil {
			if errs.ClassOf(err) != errs.SchemaError {
				t.Fatalf("refusal %v is not a schema_error", err)
			}
			if ValidName(s) {
				t.Fatal("ValidName accepts what ParseName refuses")
			}
			return
		}
		if name != s || !ValidName(s) {
			t.Fatalf("ParseName(%q) = %q", s, name)
		}
		checkNameShape(t, name)
	})
}

func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"m", "m:v1", "m@deadbeef", "deadbeef", "m~2", "m~", "a/b:c@d~e", "m@DEADBEEF"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := ParseSpec(s)
		if err != nil {
			if errs.ClassOf(err) != errs.SchemaError {
				t.Fatalf("refusal %v is not a schema_error", err)
			}
			return
		}
		out := spec.String()
		again, err := ParseSpec(out)
		if err != nil || again != spec {
			t.Fatalf("%q parses to %+v, prints %q, which parses to %+v, %v", s, spec, out, again, err)
		}
		if again.String() != out {
			t.Fatalf("String is not canonical: %q then %q", out, again.String())
		}
		// Only the NAME~N shorthands (NAME~, leading zeros) print differently.
		if out != s && spec.Kind != KindBack {
			t.Fatalf("%q prints as %q", s, out)
		}
		checkNameShape(t, spec.Name)
		switch spec.Kind {
		case KindTag:
			if !ValidTag(spec.Tag) {
				t.Fatalf("bad tag in %+v", spec)
			}
		case KindPinned, KindDigest:
			if !objects.IsDigestPrefix(spec.Digest) {
				t.Fatalf("bad digest in %+v", spec)
			}
		case KindBack:
			if spec.Back < 0 {
				t.Fatalf("negative Back in %+v", spec)
			}
		case KindRef:
		default:
			t.Fatalf("kind %d", spec.Kind)
		}
		if err := validSpec(spec); err != nil {
			t.Fatalf("validSpec refuses %+v: %v", spec, err)
		}
	})
}
