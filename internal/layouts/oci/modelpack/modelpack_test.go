package modelpack

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote/remotetest"
)

// built returns the artifact of a one-file version: its manifest and map.
func built(t testing.TB) (Blob, Blob, []byte) {
	t.Helper()
	v := remotetest.MakeVersion(t, 7, 5<<20+99)
	m, err := objects.DecodeManifest(v.Encoded)
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	for _, b := range v.Blobs {
		data = append(data, b.Data...)
	}
	files := []File{{Path: "blob.bin", Size: int64(len(data)), SHA256: digest.FromBytes(data), Digest: m.Files[0].Digest}}
	_, mp, man, err := Build("m", v.Digest, m, v.Encoded, files)
	if err != nil {
		t.Fatal(err)
	}
	return man, mp, data
}

func TestBuildParseDecodeLocate(t *testing.T) {
	man, mp, data := built(t)
	a, err := Parse(man.Data)
	if err != nil || a.Map == nil || len(a.Layers) != 1 || a.Layers[0].Path != "blob.bin" || a.Layers[0].Kind != LayerRaw {
		t.Fatalf("Parse: %+v, %v", a, err)
	}
	var meta fileMetadata
	if err := json.Unmarshal([]byte(a.Layers[0].Desc.Annotations[AnnotationFileMetadata]), &meta); err != nil ||
		meta.Name != "blob.bin" || meta.Size != int64(len(data)) || meta.Typeflag != '0' || meta.Mode != 0o644 {
		t.Fatalf("file metadata %+v, %v", meta, err)
	}
	got, m, err := DecodeMap(bytesOf(t, mp), a)
	if err != nil {
		t.Fatal(err)
	}
	// Every blob lies where Locate says, in the file's bytes.
	spans := Locate(m)
	for _, d := range m.Blobs() {
		sp, ok := spans[d]
		if !ok || objects.Sum(data[sp.Off:sp.Off+sp.Size]) != d {
			t.Fatalf("blob %s: span %+v", d.Short(), sp)
		}
	}
	if got.Digest.IsZero() {
		t.Fatal("map without digest")
	}
}

func TestRefusals(t *testing.T) {
	man, mp, _ := built(t)
	edit := func(f func(map[string]any)) []byte {
		var v map[string]any
		json.Unmarshal(man.Data, &v)
		f(v)
		b, _ := json.Marshal(v)
		return b
	}
	layer0 := func(v map[string]any) map[string]any { return v["layers"].([]any)[0].(map[string]any) }
	cases := map[string]struct {
		doc  []byte
		want errs.Class
	}{
		"not JSON":          {[]byte("{"), errs.SchemaError},
		"schema 1":          {edit(func(v map[string]any) { v["schemaVersion"] = 1 }), errs.UnsupportedVersion},
		"not ModelPack":     {edit(func(v map[string]any) { v["artifactType"] = "x"; v["config"].(map[string]any)["mediaType"] = "y" }), errs.SchemaError},
		"md5 digest":        {edit(func(v map[string]any) { layer0(v)["digest"] = "md5:00" }), errs.SchemaError},
		"negative size":     {edit(func(v map[string]any) { layer0(v)["size"] = -1 }), errs.SizeLimitExceeded},
		"escaping path":     {edit(func(v map[string]any) { layer0(v)["annotations"].(map[string]any)[AnnotationFilepath] = "../x" }), errs.PathTraversal},
		"no path":           {edit(func(v map[string]any) { delete(layer0(v)["annotations"].(map[string]any), AnnotationFilepath) }), errs.SchemaError},
		"unknown mediaType": {edit(func(v map[string]any) { layer0(v)["mediaType"] = "application/x-foo" }), errs.UnsupportedVersion},
		"too big":           {bytes.Repeat([]byte(" "), MaxDocumentBytes+1), errs.SizeLimitExceeded},
	}
	for name, c := range cases {
		if _, err := Parse(c.doc); errs.ClassOf(err) != c.want {
			t.Errorf("%s: %v, want %s", name, err, c.want.Key())
		}
	}
	a, _ := Parse(man.Data)
	var m map[string]any
	json.Unmarshal(bytesOf(t, mp), &m)
	m["files"].([]any)[0].(map[string]any)["sha256"] = digest.FromString("other").String()
	lying, _ := json.Marshal(m)
	if _, _, err := DecodeMap(lying, a); errs.ClassOf(err) != errs.SchemaError {
		t.Errorf("a map that disagrees with the layers: %v, want schema_error", err)
	}
	json.Unmarshal(bytesOf(t, mp), &m)
	enc := m["manifest"].(string)
	m["manifest"] = enc[:len(enc)-8] + "AAAAAAA="
	lying, _ = json.Marshal(m)
	if _, _, err := DecodeMap(lying, a); errs.ClassOf(err) != errs.IntegrityError {
		t.Errorf("a map whose manifest does not hash to its digest: %v, want integrity_error", err)
	}
}

// FuzzParse: no input panics, and what parses has clean paths.
func FuzzParse(f *testing.F) {
	man, _, _ := built(f)
	f.Add(man.Data)
	f.Add([]byte(`{"schemaVersion":2,"config":{"mediaType":"application/vnd.cncf.model.config.v1+json","digest":"sha256:` + digest.FromString("").Encoded() + `","size":0},"layers":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := Parse(b)
		if err != nil {
			if errs.ClassOf(err) == 0 {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		for _, l := range a.Layers {
			if l.Path != "" && !objects.IsCleanPath(l.Path) {
				t.Fatalf("path %q accepted", l.Path)
			}
		}
	})
}

// mapBlob reads, byte for byte, what encoding/json writes of a map
// layer, and its descriptor is of those bytes: the artifact's digests
// depend on it.
func TestMapBlobIsJSONs(t *testing.T) {
	long := make([]byte, 1<<20+5)
	for i := range long {
		long[i] = byte(i * 31)
	}
	files := []File{{Path: "a<b>&.safetensors", Size: 3, SHA256: digest.FromString("x"), Digest: objects.Sum([]byte("x"))}}
	for _, enc := range [][]byte{nil, {}, []byte(`{"schema":1}`), long} {
		m := Map{Schema: 1, Digest: objects.Sum(enc), Files: files, Manifest: enc}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		b, err := mapBlob(m, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range [][]byte{bytesOf(t, b), readSmall(t, b.Open())} {
			if !bytes.Equal(got, want) {
				t.Fatalf("manifest of %d bytes: mapBlob gave %d bytes, encoding/json %d", len(enc), len(got), len(want))
			}
		}
		if b.Desc.Digest != digest.FromBytes(want) || b.Desc.Size != int64(len(want)) {
			t.Fatalf("manifest of %d bytes: descriptor %s, %d bytes; the bytes are %s", len(enc), b.Desc.Digest, b.Desc.Size, digest.FromBytes(want))
		}
	}
}

// readSmall reads r a few bytes at a time, as a reader with a small
// buffer does: a block must not be lost between two reads.
func readSmall(t *testing.T, r io.Reader) []byte {
	var out []byte
	buf := make([]byte, 7)
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// bytesOf reads blob b whole (Open).
func bytesOf(t testing.TB, b Blob) []byte {
	t.Helper()
	out, err := io.ReadAll(b.Open())
	if err != nil {
		t.Fatal(err)
	}
	return out
}
