package mpk_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/mpk"
	"github.com/mstore/mstore/internal/formats/mpk/mpktest"
)

// bombPart is one stretch of a generated bomb's tar stream: literal bytes,
// or zeros.
type bombPart struct {
	bytes []byte
	zeros int64
}

// gzipBomb makes a multi-member gzip file: one member per literal part,
// and for zeros one precompressed member of 1 MiB of zeros repeated (a
// classic bomb: gzip readers concatenate members), so that a bomb of
// hundreds of MiB costs next to nothing to make.
func gzipBomb(t *testing.T, parts ...bombPart) []byte {
	t.Helper()
	member := func(b []byte) []byte {
		var buf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		if err != nil {
			t.Fatal(err)
		}
		zw.Write(b)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	megabyte := member(make([]byte, 1<<20))
	var out []byte
	for _, p := range parts {
		if p.bytes != nil {
			out = append(out, member(p.bytes)...)
		}
		if p.zeros%(1<<20) != 0 {
			t.Fatal("test bug: bombs are made of whole MiB of zeros")
		}
		out = append(out, bytes.Repeat(megabyte, int(p.zeros>>20))...)
	}
	return out
}

// validTarEntries returns the tar stream of the valid fixture's entries
// without the end marker, to put a bomb after.
func validTarEntries() []byte {
	return mpktest.Tar(validEntries(), mpktest.TarOptions{NoEndMarker: true})
}

// countingReader counts the compressed bytes Load reads.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// TestGzipBombsStopAtTheLimit feeds Load archives that decompress to
// 256 MiB (about 256 KiB compressed) and checks that each stops at
// the limit with size_limit_exceeded, reading little of the input and
// allocating a few fixed buffers, not the bomb.
func TestGzipBombsStopAtTheLimit(t *testing.T) {
	const bomb = 256 << 20
	const limit = 16 << 20
	header := func(name string, size int64) []byte { return mpktest.Header(mpktest.Entry{Name: name, Size: size}) }
	many := []bombPart{{bytes: validTarEntries()}}
	for i := range 64 {
		many = append(many, bombPart{bytes: header(fmt.Sprintf("model/part%02d.so", i), 4<<20)}, bombPart{zeros: 4 << 20})
	}
	cases := []struct {
		name   string
		limits formats.Limits
		parts  []bombPart
	}{
		{"one member over max_archive_bytes", mpk.LimitsOf(mpk.Bounds{MaxArchiveBytes: limit}),
			[]bombPart{{bytes: validTarEntries()}, {bytes: header("model/bomb.so", bomb)}, {zeros: bomb}}},
		{"a member declared over max_entry_bytes", mpk.LimitsOf(mpk.Bounds{MaxEntryBytes: limit}),
			[]bombPart{{bytes: validTarEntries()}, {bytes: header("model/bomb.so", bomb)}, {zeros: bomb}}},
		{"many members over max_archive_bytes", mpk.LimitsOf(mpk.Bounds{MaxArchiveBytes: limit}), many},
		{"zeros after the end marker", mpk.LimitsOf(mpk.Bounds{MaxArchiveBytes: limit}),
			[]bombPart{{bytes: validTarEntries()}, {zeros: bomb}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := gzipBomb(t, tc.parts...)
			r := &countingReader{r: bytes.NewReader(data)}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err := mpk.Load(r, mpk.Options{Limits: tc.limits})
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			if errs.ClassOf(err) != errs.SizeLimitExceeded {
				t.Fatalf("got %v, want size_limit_exceeded", err)
			}
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes compressed, %d read; %d bytes allocated; %v", len(data), r.n, allocated, elapsed)
			if allocated > 4<<20 {
				t.Errorf("Load allocated %d bytes for a %d-byte bomb: memory must not grow with the bomb", allocated, int64(bomb))
			}
			if r.n > int64(len(data))/4 {
				t.Errorf("Load read %d of %d compressed bytes: it must stop near the limit", r.n, len(data))
			}
		})
	}
}

// TestLimitsAreInclusive loads the valid fixture with every limit set to
// exactly what it needs, then one less.
func TestLimitsAreInclusive(t *testing.T) {
	data := archive(validEntries())
	a, err := mpk.Load(bytes.NewReader(data), mpk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var largest int64
	for _, m := range a.Members {
		largest = max(largest, m.Size)
	}
	exact := []mpk.Bounds{
		{MaxArchiveBytes: a.TarSize},
		{MaxEntries: int64(len(validEntries()))},
		{MaxEntryBytes: largest},
		{MaxJSONDepth: 6}, // the pipeline: object, pipelines, pipeline, sequence, stage, input
	}
	under := []mpk.Bounds{
		{MaxArchiveBytes: a.TarSize - 1},
		{MaxEntries: int64(len(validEntries())) - 1},
		{MaxEntryBytes: largest - 1},
		{MaxJSONDepth: 5},
	}
	for i := range exact {
		if _, err := mpk.Load(bytes.NewReader(data), mpk.Options{Limits: mpk.LimitsOf(exact[i])}); err != nil {
			t.Errorf("limits %+v: %v", exact[i], err)
		}
		if _, err := mpk.Load(bytes.NewReader(data), mpk.Options{Limits: mpk.LimitsOf(under[i])}); errs.ClassOf(err) != errs.SizeLimitExceeded {
			t.Errorf("limits %+v: %v, want size_limit_exceeded", under[i], err)
		}
	}
	if got := mpk.Limits(formats.Limits{}); got.MaxArchiveBytes != mpk.DefaultMaxArchiveBytes || got.MaxEntries != mpk.DefaultMaxEntries ||
		got.MaxEntryBytes != mpk.DefaultMaxEntryBytes || got.MaxJSONDepth != mpk.DefaultMaxJSONDepth {
		t.Errorf("defaults: %+v", got)
	}
	if got := mpk.Limits(mpk.LimitsOf(mpk.Bounds{MaxJSONDepth: 1 << 30})); got.MaxJSONDepth != mpk.MaxJSONDepthCap {
		t.Errorf("max_json_depth %d, want it capped at %d", got.MaxJSONDepth, mpk.MaxJSONDepthCap)
	}
}

// TestParseIsDeterministic parses the same archive twice, and the stable
// order of stages.
func TestParseIsDeterministic(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(fixtureDir, "valid_stable_order.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	dir := formattest.NewMemDir(map[string][]byte{"m.tar.gz": data})
	a, err := mpk.Codec.Parse(dir, []string{"m.tar.gz"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := mpk.Codec.Parse(dir, []string{"m.tar.gz"})
	if err != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("two parses differ (%v)", err)
	}
	want := `[{"sequence_id":0,"name":"pre","pluginId":"simaai_pre","configPath":"etc/pre.json","processor":"CVU","kernel":"cvu"},` +
		`{"sequence_id":10,"name":"mid_a","pluginId":"simaai_mid_a","configPath":"etc/mid_a.json","processor":"MLA","kernel":"mla","input":["pre"]},` +
		`{"sequence_id":10,"name":"mid_b","pluginId":"simaai_mid_b","configPath":"etc/mid_b.json","processor":"MLA","kernel":"mla","input":["pre","mid_a"]},` +
		`{"sequence_id":20,"name":"post","pluginId":"simaai_post","configPath":"etc/post.json","processor":"APU","kernel":"apu","input":["mid_b","mid_a"]}]`
	if got := a.Files[0].Meta[mpk.MetaStages]; got != want {
		t.Errorf("stages\n%s\nwant\n%s", got, want)
	}
	if got := a.Files[0].Meta[mpk.MetaContracts]; got != `[{"member":"model/resnet50_mpk.json","version":"1.0"}]` {
		t.Errorf("contracts %s", got)
	}
	for _, tn := range a.Tensors {
		if tn.DType != "U8" || len(tn.Shape) != 1 || tn.Shape[0] != tn.Size {
			t.Errorf("member tensor %+v", tn)
		}
	}
}

// TestParseRefusesTwoArchives: a model is one archive.
func TestParseRefusesTwoArchives(t *testing.T) {
	data := archive(validEntries())
	dir := formattest.NewMemDir(map[string][]byte{"a.tar.gz": data, "b.tar.gz": data})
	if _, err := mpk.Codec.Parse(dir, []string{"a.tar.gz", "b.tar.gz"}); errs.ClassOf(err) != errs.SchemaError {
		t.Errorf("got %v, want schema_error", err)
	}
}

// TestClaims: the codec takes every archive-like name so that Parse can
// refuse the wrong ones.
func TestClaims(t *testing.T) {
	for p, want := range map[string]bool{
		"model.tar.gz": true, "a/b.TAR.GZ": true, "x.mpk": true, "x.MPK": true, "x.tgz": true, "x.tar": true, "x.gz": true,
		"model.safetensors": false, "config.json": false, "x.zip": false, "tar.gz.txt": false,
	} {
		if got := mpk.Codec.Claims(p); got != want {
			t.Errorf("Claims(%q) = %v", p, got)
		}
	}
}

// TestDecode gives the tar stream the layout describes.
func TestDecode(t *testing.T) {
	data := archive(validEntries())
	dir := formattest.NewMemDir(map[string][]byte{"m.tar.gz": data})
	rc, err := mpk.Codec.(formats.Decoder).Decode(dir, "m.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, mpktest.Tar(validEntries(), mpktest.TarOptions{})) {
		t.Errorf("Decode gave %d bytes (%v), not the tar stream", len(got), err)
	}
	bad := formattest.NewMemDir(map[string][]byte{"m.tar.gz": []byte("not gzip")})
	if _, err := mpk.Codec.(formats.Decoder).Decode(bad, "m.tar.gz"); errs.ClassOf(err) != errs.InvalidArchive {
		t.Errorf("Decode of a non-gzip file: %v", err)
	}
}

// TestCanonicalWriter: the same tar stream always gives the same bytes,
// with the fixed gzip header.
func TestCanonicalWriter(t *testing.T) {
	tarStream := mpktest.Tar(validEntries(), mpktest.TarOptions{})
	compress := func() []byte {
		var b bytes.Buffer
		w := mpk.NewCanonicalWriter(&b)
		for i := 0; i < len(tarStream); i += 1000 { // written in pieces, as the restorer does
			w.Write(tarStream[i:min(i+1000, len(tarStream))])
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	a, b := compress(), compress()
	if !bytes.Equal(a, b) {
		t.Fatal("two compressions differ")
	}
	if !bytes.Equal(a[:10], []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}) {
		t.Errorf("gzip header % x: want no name, mtime 0, OS 255", a[:10])
	}
	if _, err := mpk.Load(bytes.NewReader(a), mpk.Options{}); err != nil {
		t.Errorf("the canonical archive does not load: %v", err)
	}
}
