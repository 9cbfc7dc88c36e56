package objects

import (
	"strings"
	"testing"
)

// TestPeekLogicalBytes: on encoded manifests (files with odd paths and
// metadata full of brackets and quotes, no files at all) the peek agrees
// with LogicalBytes; on anything that is not the encoder's shape it says
// so rather than guess, and never panics on a cut.
func TestPeekLogicalBytes(t *testing.T) {
	d := Sum([]byte("x"))
	file := func(path string, size int64, meta map[string]string) File {
		return File{Path: path, Size: size, Digest: d, Role: RoleOther, Meta: meta, Extents: []Extent{{Kind: ExtentZeros, Size: size}}}
	}
	manifests := []*Manifest{
		{Schema: ManifestSchema, Format: "safetensors", Files: []File{}, Tensors: []Tensor{}},
		{Schema: ManifestSchema, Format: `we"ird{[`, Files: []File{
			file(`a"b{c}[d].json`, 12, map[string]string{`k"}]`: `{"path":"x","size":999}`}),
			file("model.safetensors", 1<<40, nil),
			file("z", 0, nil),
		}, Tensors: []Tensor{}},
	}
	for _, m := range manifests {
		enc, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, ok := PeekLogicalBytes(enc)
		if !ok || got != m.LogicalBytes() {
			t.Errorf("peek of %s: %d %v, want %d", enc, got, ok, m.LogicalBytes())
		}
		for i := range len(enc) {
			if n, ok := PeekLogicalBytes(enc[:i]); ok && n != m.LogicalBytes() {
				t.Errorf("peek of a manifest cut at %d: %d, ok", i, n)
			}
		}
	}
	for _, bad := range []string{"", "{}", `{"schema": 1, "format":"x","files":[],"tensors":[]}`, `{"schema":1,"format":"x","files":[{"size":3,"path":"a"}],"tensors":[]}`,
		`{"schema":1,"format":"x","files":[{"path":"a","size":99999999999999999999}],"tensors":[]}`, strings.Repeat("{", 100)} {
		if n, ok := PeekLogicalBytes([]byte(bad)); ok {
			t.Errorf("peek of %q: %d, ok; want not ok", bad, n)
		}
	}
}
