package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/onnx"
	"github.com/mstore/mstore/internal/modeldir"
	"github.com/mstore/mstore/internal/testenv"
)

// realONNX are the real models the ONNX tests add, relative to
// shared/testdata/onnx; their external data files are found through them.
var realONNX = []string{
	"burn-onnx-mnist.onnx",
	"silero_vad.onnx",
	"silero_vad_16k_op15.onnx",
	"silero_vad_half.onnx",
	"silero_vad_op18_ifless.onnx",
	"onnx-light/light_squeezenet.onnx",
	"onnx-light/light_resnet50.onnx",
	"burn-onnx-fixtures/external_data.onnx",
	"burn-onnx-fixtures/external_data_offset.onnx",
	"burn-onnx-fixtures/mixed_data.onnx",
	"burn-onnx-fixtures/multi_external_files.onnx",
	"burn-onnx-fixtures/data_types.onnx",
	"burn-onnx-fixtures/all_dtypes.onnx",
	"burn-onnx-fixtures/large_constants.onnx",
}

// onnxCheck runs e2e/testdata/onnx_check.py (onnx.load with external data,
// then onnx.checker.check_model) on a model, or skips where Debian's
// python3-onnx is missing.
type onnxReport struct {
	Checked      bool    `json:"checked"`
	Why          string  `json:"why"`
	Initializers int     `json:"initializers"`
	External     [][]any `json:"external"`
}

func onnxCheck(t *testing.T, model string) onnxReport {
	t.Helper()
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import onnx").Run(); err != nil {
		testenv.Missing(t, "%s cannot import onnx (install python3-onnx, as .ci/run does): %v", python, err)
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(python, filepath.Join(root, "e2e", "testdata", "onnx_check.py"), model).CombinedOutput()
	if err != nil {
		t.Fatalf("onnx refuses %s: %v\n%s", model, err, out)
	}
	var r onnxReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("onnx_check.py printed %q: %v", out, err)
	}
	return r
}

// externalOffsets parses a checked-out model with the codec and returns
// the offset and size of every tensor in a data file.
func externalOffsets(t *testing.T, dir string) map[string][2]int64 {
	t.Helper()
	d, err := modeldir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	l, err := onnx.Codec.Parse(d, d.SortedFiles(onnx.Codec.Claims))
	if err != nil {
		t.Fatalf("checkout does not parse: %v", err)
	}
	out := map[string][2]int64{}
	for _, f := range l.Files {
		if onnx.Codec.Claims(f.Path) {
			continue
		}
		for _, e := range f.Extents {
			if e.Kind == formats.TensorData {
				out[l.Tensors[e.Tensor].Name] = [2]int64{e.Offset, e.Size}
			}
		}
	}
	return out
}

// TestONNXRealModels adds every real model (its data files come with it),
// checks it out byte for byte, then re-laid-out into one aligned external
// data file and back inside; onnx loads and checks each re-layout, and
// adding a re-layout again gives the same tensors.
func TestONNXRealModels(t *testing.T) {
	root := sharedTestdata(t, "onnx")
	c := newCLI(t)
	for _, rel := range realONNX {
		t.Run(rel, func(t *testing.T) {
			c := &cli{t: t, store: c.store}
			src := filepath.Join(root, filepath.FromSlash(rel))
			res := c.add(src, "--name", "m")
			if res.Format != "onnx" {
				t.Fatalf("added as %s", res.Format)
			}
			shown := c.show(res.Digest)

			same := filepath.Join(t.TempDir(), "same")
			c.ok("checkout", res.Digest, same)
			got := readTree(t, same)
			for p, b := range got {
				orig, err := os.ReadFile(filepath.Join(filepath.Dir(src), filepath.FromSlash(p)))
				if err != nil || !bytes.Equal(orig, b) {
					t.Errorf("%s: checkout differs from the original (%v)", p, err)
				}
			}
			if len(got) != len(shown.Manifest.Files) {
				t.Errorf("%d files checked out, the version has %d", len(got), len(shown.Manifest.Files))
			}

			ext := filepath.Join(t.TempDir(), "ext")
			c.ok("checkout", res.Digest, ext, "--external-data", "weights.data", "--alignment", "4096", "--size-threshold", "1")
			offsets := externalOffsets(t, ext)
			for name, off := range offsets {
				if off[0]%4096 != 0 {
					t.Errorf("%s at offset %d of the data file, not 4096-aligned", name, off[0])
				}
			}
			report := onnxCheck(t, filepath.Join(ext, filepath.Base(src)))
			if len(report.External) != len(offsets) {
				t.Errorf("onnx sees %d external initializers, mstore wrote %d", len(report.External), len(offsets))
			}
			for _, e := range report.External {
				name, _ := e[0].(string)
				off, _ := e[2].(float64)
				if want, ok := offsets[name]; !ok || int64(off) != want[0] || e[1] != "weights.data" {
					t.Errorf("onnx reads %v, mstore wrote %v", e, want)
				}
			}
			if !report.Checked {
				t.Logf("%s: loaded, not checked: %s", rel, report.Why)
			}

			inside := filepath.Join(t.TempDir(), "inside")
			c.ok("checkout", res.Digest, inside, "--inline-data")
			if n := len(readTree(t, inside)); n != 1 {
				t.Errorf("--inline-data wrote %d files, want the .onnx alone", n)
			}
			if r := onnxCheck(t, filepath.Join(inside, filepath.Base(src))); len(r.External) != 0 {
				t.Errorf("--inline-data left external tensors: %v", r.External)
			}

			again := c.add(ext, "--name", "again")
			if got := c.show(again.Digest).tensorDigests(); !equalMaps(got, shown.tensorDigests()) {
				t.Errorf("the re-laid-out model holds other tensors")
			}
		})
	}
}

// ortRun runs e2e/testdata/ort_run.js: the model in ONNX Runtime on fixed
// inputs, its outputs as JSON. It skips where node or the onnxruntime-node
// package (.ci/node, installed by .ci/run) is missing.
func ortRun(t *testing.T, model, spec string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node is not installed: the ONNX Runtime check is skipped")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(root, ".ci", "node", "node_modules", "onnxruntime-node")
	if _, err := os.Stat(pkg); err != nil {
		testenv.Missing(t, "onnxruntime-node is not in %s (`npm install --prefix .ci/node --ignore-scripts onnxruntime-node`, as .ci/run does)", pkg)
	}
	cmd := exec.Command(node, filepath.Join(root, "e2e", "testdata", "ort_run.js"), pkg, model, spec)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ONNX Runtime fails on %s: %v\n%s", model, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// TestONNXRuntimeAfterRelayout runs real models in ONNX Runtime before and
// after a re-layout into one external data file with 4 KiB alignment (and
// back inside): same inputs, bit-identical outputs.
func TestONNXRuntimeAfterRelayout(t *testing.T) {
	root := sharedTestdata(t, "onnx")
	const silero = `{"dims": {"batch": 1, "sequence": 512}, "values": {"sr": 16000}}`
	models := []struct{ rel, spec string }{
		{"burn-onnx-mnist.onnx", `{}`},
		{"silero_vad_16k_op15.onnx", silero}, // initializers inside If subgraphs
		{"silero_vad_op18_ifless.onnx", silero},
	}
	c := newCLI(t)
	for _, m := range models {
		t.Run(m.rel, func(t *testing.T) {
			c := &cli{t: t, store: c.store}
			src := filepath.Join(root, m.rel)
			want := ortRun(t, src, m.spec)
			if !strings.Contains(want, `"hex"`) {
				t.Fatalf("no outputs: %s", want)
			}
			res := c.add(src, "--name", "ort")
			ext := filepath.Join(t.TempDir(), "ext")
			// The default --size-threshold (1 KiB, as onnx's) keeps small
			// INT64 shape tensors inside: ONNX Runtime's shape inference
			// does not read external data.
			c.ok("checkout", res.Digest, ext, "--external-data", "model.onnx.data", "--alignment", "4096")
			offsets := externalOffsets(t, ext)
			if len(offsets) == 0 {
				t.Fatal("no tensor was moved to external data")
			}
			if got := ortRun(t, filepath.Join(ext, m.rel), m.spec); got != want {
				t.Errorf("outputs differ after the re-layout into external data:\nbefore %.300s\nafter  %.300s", want, got)
			}
			// Back inside, from the re-laid-out copy added as a new version.
			again := c.add(ext, "--name", "ort-ext")
			inside := filepath.Join(t.TempDir(), "inside")
			c.ok("checkout", again.Digest, inside, "--inline-data")
			if got := ortRun(t, filepath.Join(inside, m.rel), m.spec); got != want {
				t.Errorf("outputs differ after external → inside")
			}
			orig, _ := os.ReadFile(src)
			back, _ := os.ReadFile(filepath.Join(inside, m.rel))
			if !bytes.Equal(orig, back) {
				// Models whose tensors are raw_data come back to their own bytes.
				t.Errorf("inside → external → inside is not the original file")
			}
		})
	}
}
