package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/formats/mpk"
	"github.com/mstore/mstore/internal/formats/mpk/mpktest"
	"github.com/mstore/mstore/internal/testenv"
)

// mpkFixture is one entry of formats/mpk/testdata/fixtures_manifest.json,
// the source of truth for the MPK security fixtures.
type mpkFixture struct {
	Name    string `json:"name"`
	Rule    string `json:"rule"`
	Outcome string `json:"outcome"`
	Limits  *struct {
		MaxArchiveBytes int64 `json:"max_archive_bytes"`
		MaxEntries      int64 `json:"max_entries"`
		MaxEntryBytes   int64 `json:"max_entry_bytes"`
		MaxJSONDepth    int   `json:"max_json_depth"`
	} `json:"limits"`
	SHA256 string `json:"sha256"`
}

// flags are add's flags for the fixture's limits.
func (f mpkFixture) flags() []string {
	if f.Limits == nil {
		return nil
	}
	var out []string
	for flag, v := range map[string]int64{"--max-archive-bytes": f.Limits.MaxArchiveBytes, "--max-entries": f.Limits.MaxEntries,
		"--max-entry-bytes": f.Limits.MaxEntryBytes, "--max-json-depth": int64(f.Limits.MaxJSONDepth)} {
		if v > 0 {
			out = append(out, flag, fmt.Sprint(v))
		}
	}
	return out
}

func mpkFixtureDir(t *testing.T) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "internal", "formats", "mpk", "testdata")
}

func mpkFixtures(t *testing.T) []mpkFixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(mpkFixtureDir(t), "fixtures_manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Fixtures []mpkFixture `json:"fixtures"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Fixtures) == 0 {
		t.Fatal("the fixtures manifest lists no fixtures")
	}
	return m.Fixtures
}

// sandboxRun runs `mstore --store STORE args...` in the working directory
// cwd with TMPDIR set to tmp.
func (c *cli) sandboxRun(cwd, tmp string, args ...string) result {
	c.t.Helper()
	return execMstoreIn(c.t, cwd, []string{"TMPDIR=" + tmp}, append([]string{"--store", c.store}, args...)...)
}

// TestMPKFixtures adds every fixture of the manifest with the limits it
// names, each from its own sandbox (the archive's folder, the working
// directory and TMPDIR): a valid one is added; a hostile one fails with the
// manifest's class key in the printed error (text and JSON), adds nothing
// to the store and writes nothing anywhere — in the sandbox, beside it, or
// where its hostile paths point.
func TestMPKFixtures(t *testing.T) {
	c := newCLI(t)
	dir := mpkFixtureDir(t)
	c.add(filepath.Join(dir, "fixtures", "valid.tar.gz"), "--name", "seed") // the store exists from here on
	for _, f := range mpkFixtures(t) {
		t.Run(f.Name, func(t *testing.T) {
			c := &cli{t: t, store: c.store}
			sandbox := t.TempDir()
			in, cwd, tmp := filepath.Join(sandbox, "in"), filepath.Join(sandbox, "cwd"), filepath.Join(sandbox, "tmp")
			for _, d := range []string{in, cwd, tmp} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			data, err := os.ReadFile(filepath.Join(dir, "fixtures", f.Name))
			if err != nil {
				t.Fatal(err)
			}
			path := writeFile(t, filepath.Join(in, f.Name), data)
			before := c.snapshot()
			args := append([]string{"add", path, "--name", "fixture"}, f.flags()...)
			if f.Outcome == "ok" {
				if r := c.sandboxRun(cwd, tmp, args...); r.code != 0 {
					t.Fatalf("a valid archive was refused:\n%s", r)
				}
			} else {
				r := c.sandboxRun(cwd, tmp, append([]string{"--json"}, args...)...)
				var e struct {
					Error struct{ Class, Message string } `json:"error"`
				}
				if err := json.Unmarshal([]byte(r.stderr), &e); err != nil || r.code != exitCodes[f.Outcome] ||
					e.Error.Class != f.Outcome || strings.Contains(e.Error.Message, f.Outcome+": ") || r.stdout != "" {
					t.Errorf("want %s (exit %d) for %s:\n%s", f.Outcome, exitCodes[f.Outcome], f.Rule, r)
				}
				r = c.sandboxRun(cwd, tmp, args...)
				if r.code != exitCodes[f.Outcome] || !strings.Contains(r.stderr, f.Outcome) {
					t.Errorf("without --json: want %s in the error:\n%s", f.Outcome, r)
				}
				c.requireUnchanged(before)
			}
			if got := listFiles(t, sandbox); !equalStrings(got, []string{"in/" + f.Name}) {
				t.Errorf("files written in the sandbox: %v", diffStrings([]string{"in/" + f.Name}, got))
			}
			if got := dirEntries(t, filepath.Dir(sandbox)); len(got) != 1 {
				t.Errorf("files written beside the sandbox: %v", got)
			}
		})
	}
	for _, p := range []string{"/tmp/mstore-mpk-fixture-absolute.so", "/tmp/evil.so"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists: a hostile entry escaped", p)
		}
	}
}

func gunzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMPKRoundTrip: show prints the stages in order; checkout writes the
// tar stream byte for byte, gzipped canonically (the same bytes every
// time, and checkout → add → checkout is a fixed point); --extract writes
// the validated tree.
func TestMPKRoundTrip(t *testing.T) {
	c := newCLI(t)
	src := filepath.Join(mpkFixtureDir(t), "fixtures", "valid_stable_order.tar.gz")
	original, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	res := c.add(src, "--name", "npu/resnet")
	if res.Format != "mpk" || res.Tensors != 5 {
		t.Errorf("add: %+v", res)
	}

	text := c.ok("show", "npu/resnet")
	var last int
	for _, stage := range []string{"pre ", "mid_a ", "mid_b ", "post "} {
		i := strings.Index(text, "  "+stage)
		if i < last {
			t.Fatalf("show does not print the stages in order (ascending sequence_id, then position):\n%s", text)
		}
		last = i
	}
	var shown struct {
		Details struct {
			MPK []struct {
				Stages []struct {
					Name string `json:"name"`
				} `json:"stages"`
			} `json:"mpk"`
		} `json:"details"`
	}
	c.json(&shown, "show", "npu/resnet")
	if len(shown.Details.MPK) != 1 || len(shown.Details.MPK[0].Stages) != 4 || shown.Details.MPK[0].Stages[1].Name != "mid_a" {
		t.Errorf("show --json details: %+v", shown.Details)
	}

	checkout := func(ref string) []byte {
		dest := filepath.Join(t.TempDir(), "out")
		c.ok("checkout", ref, dest)
		return readFileT(t, filepath.Join(dest, "valid_stable_order.tar.gz"))
	}
	first := checkout("npu/resnet")
	if !bytes.Equal(gunzipBytes(t, first), gunzipBytes(t, original)) {
		t.Fatal("the checked-out tar stream differs from the added one")
	}
	var canonical bytes.Buffer
	w := mpk.NewCanonicalWriter(&canonical)
	w.Write(gunzipBytes(t, original))
	w.Close()
	if !bytes.Equal(first, canonical.Bytes()) {
		t.Error("the checked-out archive is not the canonical gzip of its tar stream")
	}
	if !bytes.Equal(checkout("npu/resnet"), first) {
		t.Error("two checkouts differ")
	}
	again := filepath.Join(t.TempDir(), "valid_stable_order.tar.gz")
	writeFile(t, again, first)
	re := c.add(again, "--name", "npu/resnet")
	if !bytes.Equal(checkout("npu/resnet"), first) {
		t.Error("checkout → add → checkout changed the archive")
	}
	if c.add(again, "--name", "npu/resnet").Digest != re.Digest {
		t.Error("adding the canonical archive twice gave two versions")
	}
	shownAgain := c.show("npu/resnet")
	if d := c.show(res.Digest); d.tensorDigests()["model/resnet50.elf"] != shownAgain.tensorDigests()["model/resnet50.elf"] {
		t.Error("the re-added archive's members are not the same blobs")
	}

	tree := filepath.Join(t.TempDir(), "tree")
	out := c.ok("checkout", "npu/resnet", tree, "--extract")
	if !strings.Contains(out, "extracted") {
		t.Errorf("checkout --extract printed %q", out)
	}
	want := []string{"etc/pipeline_sequence.json", "etc/preproc.json", "etc/resnet50_mpk.json", "lib/libpostproc.so", "share/resnet50.elf"}
	if got := listFiles(t, tree); !equalStrings(got, want) {
		t.Errorf("extracted %v, want %v", got, want)
	}
	c.fail("schema_error", "checkout", "npu/resnet", filepath.Join(t.TempDir(), "x"), "--extract", "--format", "safetensors")
	c.fail("unsupported_version", "checkout", "npu/resnet", filepath.Join(t.TempDir(), "x"), "--format", "safetensors")
	c.fail("schema_error", "checkout", "npu/resnet", filepath.Join(t.TempDir(), "x"), "--tensors", "model/*.json")
}

func readFileT(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mpkArchive is a valid archive holding elf and so.
func mpkArchive(elf, so []byte) []byte {
	return mpktest.Gzip(mpktest.Tar([]mpktest.Entry{
		mpktest.File("pkg/mpk.json", []byte(`{"version": "1.0"}`)),
		mpktest.File("pkg/pipeline_sequence.json", []byte(`{"pipelines": [{"sequence": [{"sequence_id": 1, "name": "run", "pluginId": "p", "configPath": "etc/run.json", "processor": "MLA", "kernel": "mla", "input": "decoder"}]}]}`)),
		mpktest.File("pkg/model.elf", elf),
		mpktest.File("pkg/libshared.so", so),
	}, mpktest.TarOptions{}))
}

// Two archives that share a binary share its bytes in the store; diff
// names the member that changed, and says the pipeline did not.
func TestMPKSharedBinaryDedup(t *testing.T) {
	c := newCLI(t)
	so := randBytes(1, 9<<20)
	dir := t.TempDir()
	a := writeFile(t, filepath.Join(dir, "a", "model.tar.gz"), mpkArchive(randBytes(2, 4096), so))
	b := writeFile(t, filepath.Join(dir, "b", "model.tar.gz"), mpkArchive(randBytes(3, 4096), so))
	first := c.add(a, "--name", "npu/model")
	second := c.add(b, "--name", "npu/model")
	if first.NewBytes < int64(len(so)) || second.NewBytes > 64<<10 {
		t.Errorf("new bytes: %d then %d; the shared %d-byte binary must be stored once", first.NewBytes, second.NewBytes, len(so))
	}
	diff := c.ok("diff", "npu/model~1", "npu/model")
	if !strings.Contains(diff, "pkg/model.elf") || strings.Contains(diff, "~ tensor pkg/libshared.so") || !strings.Contains(diff, "= pipeline unchanged") {
		t.Errorf("diff:\n%s", diff)
	}
}

// A gzip bomb (256 MiB of zeros in about 256 KiB) stops at
// --max-archive-bytes (128 MiB), quickly and in a small process, leaving the
// store as it was. Peak memory is measured with GNU time when it is there
// (a child's ru_maxrss seen from this test would include this process's
// own memory: Go starts children with vfork, and Linux records the shared
// memory's peak at exec).
func TestMPKGzipBomb(t *testing.T) {
	c := newCLI(t)
	c.add(filepath.Join(mpkFixtureDir(t), "fixtures", "valid.tar.gz"), "--name", "seed")
	// A multi-member gzip file: the headers, then one compressed MiB of
	// zeros 256 times (gzip readers concatenate members).
	member := func(b []byte) []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	head := append(mpktest.Tar([]mpktest.Entry{mpktest.File("mpk.json", []byte(`{"version":"1.0"}`))}, mpktest.TarOptions{NoEndMarker: true}),
		mpktest.Header(mpktest.Entry{Name: "bomb.so", Size: 256 << 20})...)
	data := append(member(head), bytes.Repeat(member(make([]byte, 1<<20)), 256)...)
	bomb := writeFile(t, filepath.Join(t.TempDir(), "bomb.tar.gz"), data)
	before := c.snapshot()

	args := []string{bin, "--store", c.store, "add", bomb, "--max-archive-bytes", "128MiB"}
	rssFile := filepath.Join(t.TempDir(), "rss")
	gnuTime := "/usr/bin/time"
	if _, err := os.Stat(gnuTime); err == nil {
		args = append([]string{gnuTime, "-f", "%M", "-o", rssFile}, args...)
	} else {
		testenv.Degraded(t, "no %s (Debian's time, as .ci/run installs): peak memory not measured (the loader's allocations are bounded by formats/mpk's tests)", gnuTime)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = cleanEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	if err == nil || cmd.ProcessState.ExitCode() != exitCodes["size_limit_exceeded"] || !strings.Contains(stderr.String(), "size_limit_exceeded") {
		t.Fatalf("bomb: %v, %s", err, stderr.String())
	}
	if b, err := os.ReadFile(rssFile); err == nil {
		var kib int64 // the last line: GNU time writes the exit status before it
		lines := strings.Fields(strings.TrimSpace(string(b)))
		fmt.Sscan(lines[len(lines)-1], &kib)
		t.Logf("a %d-byte bomb of 256 MiB refused at 128 MiB in %v, peak RSS %d KiB", len(data), elapsed, kib)
		if kib <= 0 || kib > 48<<10 {
			t.Errorf("peak RSS %d KiB: memory must stay bounded by the loader's buffers, not by the bomb", kib)
		}
	}
	c.requireUnchanged(before)
}
