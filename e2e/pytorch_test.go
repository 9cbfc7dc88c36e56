package e2e

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/testenv"
)

// torchTensor is one tensor as torch_dump.py reports it.
type torchTensor struct {
	DType  string  `json:"dtype"`
	Shape  []int64 `json:"shape"`
	SHA256 string  `json:"sha256"`
}

type torchReport struct {
	Loader  string                 `json:"loader"`
	Error   string                 `json:"error"`
	Tensors map[string]torchTensor `json:"tensors"`
}

const debianPython = "/usr/bin/python3"

// haveTorch reports whether Debian's python3-torch is installed.
func haveTorch() bool {
	return exec.Command(debianPython, "-c", "import torch").Run() == nil
}

// torchDump runs testdata/torch_dump.py over paths in one process (torch
// takes seconds to import) and returns what torch.load read from each.
func torchDump(t *testing.T, paths ...string) map[string]torchReport {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(debianPython, append([]string{filepath.Join(root, "e2e", "testdata", "torch_dump.py")}, paths...)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("torch_dump.py: %v\n%s", err, out)
	}
	var report map[string]torchReport
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("torch_dump.py output: %v\n%s", err, out)
	}
	return report
}

// safetensorsDump describes the tensors of the SafeTensors files in dir as
// torch_dump.py describes a checkpoint's.
func safetensorsDump(t *testing.T, dir string) map[string]torchTensor {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if len(paths) == 0 {
		t.Fatalf("no .safetensors file in %s", dir)
	}
	out := map[string]torchTensor{}
	for _, p := range paths {
		for name, tn := range safetensorsFileDump(t, p) {
			out[name] = tn
		}
	}
	return out
}

func safetensorsFileDump(t *testing.T, path string) map[string]torchTensor {
	t.Helper()
	out := map[string]torchTensor{}
	for name, pt := range readSafetensors(t, path) {
		out[name] = torchTensor{DType: pt.DType, Shape: pt.Shape, SHA256: sha(pt.data)}
	}
	return out
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// requireSameTensors fails unless got holds exactly want's tensors.
func requireSameTensors(t *testing.T, what string, want, got map[string]torchTensor) {
	t.Helper()
	var missing, wrong []string
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			missing = append(missing, name)
		case g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) || g.SHA256 != w.SHA256:
			wrong = append(wrong, name)
		}
	}
	var extra []string
	for name := range got {
		if _, ok := want[name]; !ok {
			extra = append(extra, name)
		}
	}
	if len(missing)+len(wrong)+len(extra) > 0 {
		sort.Strings(missing)
		sort.Strings(wrong)
		sort.Strings(extra)
		t.Fatalf("%s: missing %q, different %q, unexpected %q", what, missing, wrong, extra)
	}
}

// realCheckpoints lists the zip checkpoints of shared/testdata/pytorch
// (not TorchScript, not legacy) by path.
func realCheckpoints(t *testing.T) []string {
	t.Helper()
	dir := sharedTestdata(t, "pytorch")
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".jit") && !strings.Contains(p, "legacy") {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	if len(out) == 0 {
		testenv.Missing(t, "%s holds no checkpoints", dir)
	}
	return out
}

// Every real checkpoint: added, checked out byte-identical, converted to
// SafeTensors with the tensors torch.load(weights_only=True) returns, and
// written back by mstore's own writer in a checkpoint torch.load reads to
// the same tensors.
func TestPyTorchRealCheckpoints(t *testing.T) {
	t.Parallel()
	paths := realCheckpoints(t)
	c := newCLI(t)
	work := t.TempDir()
	type outputs struct{ safetensors, pytorch string }
	outs := map[string]outputs{}
	for i, p := range paths {
		name := "ckpt" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		res := c.add(p, "--name", name)
		if res.Format != "pytorch" || res.Files != 1 || res.Tensors == 0 {
			t.Fatalf("%s: added as %q with %d files and %d tensors", p, res.Format, res.Files, res.Tensors)
		}
		same := filepath.Join(work, name, "same")
		c.ok("checkout", name, same)
		requireSameFile(t, p, filepath.Join(same, filepath.Base(p)))
		o := outputs{filepath.Join(work, name, "st"), filepath.Join(work, name, "pt")}
		checkoutLossy(c, "checkout", name, o.safetensors, "--format", "safetensors")
		checkoutLossy(c, "checkout", name, o.pytorch, "--format", "pytorch", "--tensors", "*")
		outs[p] = o
	}
	if !haveTorch() {
		testenv.Missing(t, "%s cannot import torch (install python3-torch, as .ci/run does): conversions not compared with torch.load", debianPython)
	}
	var dumps []string
	for _, p := range paths {
		dumps = append(dumps, p, filepath.Join(outs[p].pytorch, filepath.Base(p)))
	}
	report := torchDump(t, dumps...)
	restricted := 0
	for _, p := range paths {
		want := report[p]
		if want.Error != "" {
			t.Errorf("%s: torch.load refuses the original: %s", p, want.Error)
			continue
		}
		if want.Loader == "restricted" {
			restricted++
		}
		requireSameTensors(t, filepath.Base(p)+" as SafeTensors", want.Tensors, safetensorsDump(t, outs[p].safetensors))
		back := report[filepath.Join(outs[p].pytorch, filepath.Base(p))]
		if back.Error != "" || back.Loader != "weights_only" {
			t.Errorf("%s: torch.load(weights_only=True) of mstore's checkpoint: %s (loader %s)", p, back.Error, back.Loader)
			continue
		}
		requireSameTensors(t, filepath.Base(p)+" written by mstore", want.Tensors, back.Tensors)
	}
	t.Logf("%d checkpoints compared with torch.load; %d needed the restricted loader (torch 1.13 lacks BINFLOAT)", len(paths), restricted)
}

// checkoutLossy runs a checkout that either succeeds, or is refused as
// lossy_conversion (a checkpoint with values that are not tensors) and
// succeeds with --drop-non-tensors.
func checkoutLossy(c *cli, args ...string) {
	c.t.Helper()
	r := c.run(args...)
	if r.code == 0 {
		return
	}
	if r.code != exitCodes["lossy_conversion"] {
		c.t.Fatalf("neither written nor lossy_conversion:\n%s", r)
	}
	c.ok(append(args, "--drop-non-tensors")...)
}

// What mstore does not take: TorchScript, legacy checkpoints, broken files
// and pickles that would run code. The store is left as it was.
func TestPyTorchRefusals(t *testing.T) {
	dir := sharedTestdata(t, "pytorch")
	c := newCLI(t)
	c.add(filepath.Join(dir, "candle-test.pt"))
	before := c.snapshot()
	msg := c.fail("unsupported_version", "add", filepath.Join(dir, "silero_vad.jit"))
	if !strings.Contains(msg, "TorchScript") || !strings.Contains(msg, "code") {
		t.Errorf("TorchScript refusal does not say why: %s", msg)
	}
	jit, err := os.ReadFile(filepath.Join(dir, "silero_vad.jit"))
	if err != nil {
		t.Fatal(err)
	}
	renamed := writeFile(t, filepath.Join(t.TempDir(), "model.pt"), jit) // torch.jit.save(m, "model.pt") is common
	if msg := c.fail("unsupported_version", "add", renamed); !strings.Contains(msg, "TorchScript") {
		t.Errorf("TorchScript saved as .pt: refusal does not say why: %s", msg)
	}
	legacy, _ := filepath.Glob(filepath.Join(dir, "burn", "*legacy*.pt"))
	if len(legacy) == 0 {
		t.Error("no legacy checkpoints in the test data")
	}
	for _, p := range legacy {
		if msg := c.fail("unsupported_version", "add", p); !strings.Contains(msg, "legacy") {
			t.Errorf("%s: %s", p, msg)
		}
	}
	if bad := filepath.Join(filepath.Dir(dir), "bad", "burn-broken.pt"); fileExists(bad) {
		c.fail("invalid_archive", "add", bad)
	}
	work := t.TempDir()
	marker := filepath.Join(work, "ran")
	hostile := filepath.Join(work, "hostile.pt")
	writeFile(t, hostile, torchCheckpoint(systemPickle("touch "+marker)))
	if msg := c.fail("schema_error", "add", hostile); !strings.Contains(msg, "os.system") {
		t.Errorf("hostile pickle refusal does not name os.system: %s", msg)
	}
	if fileExists(marker) {
		t.Fatal("adding a hostile checkpoint ran its code")
	}
	c.requireUnchanged(before)

	ck := filepath.Join(dir, "burn", "src__pytorch__tests__reader__test_data__checkpoint.pt")
	c.add(ck, "--name", "ck")
	msg = c.fail("lossy_conversion", "checkout", "ck", filepath.Join(work, "st"), "--format", "safetensors")
	if !strings.Contains(msg, "epoch") || !strings.Contains(msg, "--drop-non-tensors") {
		t.Errorf("lossy refusal does not name what is lost: %s", msg)
	}
	if fileExists(filepath.Join(work, "st")) {
		t.Error("a refused conversion left its destination")
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// systemPickle is a pickle that calls os.system(cmd) when Python loads it.
func systemPickle(cmd string) []byte {
	b := []byte("\x80\x02cos\nsystem\nX")
	b = binary.LittleEndian.AppendUint32(b, uint32(len(cmd)))
	return append(append(b, cmd...), "\x85R."...)
}

// torchCheckpoint wraps a pickle in a zip archive laid out as torch.save
// lays it out (written by Go's archive/zip).
func torchCheckpoint(pkl []byte) []byte {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, m := range []struct {
		name string
		data []byte
	}{{"archive/data.pkl", pkl}, {"archive/version", []byte("3\n")}} {
		f, err := w.CreateHeader(&zip.FileHeader{Name: m.name, Method: zip.Store})
		if err != nil {
			panic(err)
		}
		f.Write(m.data)
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}
