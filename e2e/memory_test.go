package e2e

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/testenv"
)

// memoryLimit is the address space the binary gets below: far below what
// the hostile inputs made it build before they were budgeted.
const memoryLimit = 3 << 30

// limited runs `mstore --store STORE args...` under `prlimit --as`, and
// returns its result and peak RSS, as GNU time measures it. The rusage of
// the child itself would not do: Go starts children with vfork, and exec
// carries the parent's high-water mark into the child's ru_maxrss, so a
// large test process would be counted as mstore's peak. GNU time forks a
// small process of its own. bin is never race-built (raceBin is), so the
// limit and the peak hold under -race.
func (c *cli) limited(args ...string) (result, int64) {
	c.t.Helper()
	full := append([]string{"--store", c.store}, args...)
	for _, tool := range []string{"prlimit", "/usr/bin/time"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(c.t, "%s is not installed (util-linux, time)", tool)
		}
	}
	peakFile := filepath.Join(c.t.TempDir(), "peak")
	cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%M", "-o", peakFile,
		"prlimit", fmt.Sprintf("--as=%d", memoryLimit), bin}, full...)...)
	cmd.Env = cleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{args: full, stdout: stdout.String(), stderr: stderr.String()}
	if exit, ok := err.(*exec.ExitError); ok {
		r.code = exit.ExitCode()
	} else if err != nil {
		c.t.Fatalf("run mstore: %v", err)
	}
	// GNU time writes "Command exited with non-zero status N" before the
	// format's line when the command fails: the peak is the last line.
	out, err := os.ReadFile(peakFile)
	if err != nil {
		c.t.Fatalf("GNU time wrote no peak: %v", err)
	}
	lines := strings.Fields(strings.TrimSpace(string(out)))
	kb, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)
	if err != nil {
		c.t.Fatalf("GNU time's peak %q: %v", out, err)
	}
	return r, kb << 10
}

// pickler writes the few pickle opcodes the hostile checkpoints need.
type pickler struct{ b []byte }

func (p *pickler) op(ops ...byte) *pickler { p.b = append(p.b, ops...); return p }

func (p *pickler) str(s string) *pickler {
	p.b = append(binary.LittleEndian.AppendUint32(append(p.b, 'X'), uint32(len(s))), s...)
	return p
}

func (p *pickler) global(module, name string) *pickler {
	return p.op('c').op([]byte(module + "\n" + name + "\n")...)
}

// tensor pushes torch._utils._rebuild_tensor_v2 of storage data/0, four
// floats.
func (p *pickler) tensor() *pickler {
	p.global("torch._utils", "_rebuild_tensor_v2").op('(')
	p.op('(').str("storage").global("torch", "FloatStorage").str("0").str("cpu").op('K', 4, 't', 'Q')
	p.op('K', 0, '(', 'K', 4, 't', '(', 'K', 1, 't', 0x89)
	return p.global("collections", "OrderedDict").op(')', 'R', 't', 'R')
}

// tupleKeyPickle: a dict whose key is a tuple holding, through memo-shared
// tuples, one 64 KiB string 8^7 times (128 GiB spelled out).
func tupleKeyPickle() []byte {
	p := (&pickler{b: []byte{0x80, 2}}).op('}', '(')
	for range 7 {
		p.op('(')
	}
	p.str(strings.Repeat("k", 64<<10)).op('q', 0)
	for l := range 7 {
		for range 7 {
			p.op('h', byte(l))
		}
		p.op('t', 'q', byte(l+1))
	}
	return p.tensor().op('u', '.').b
}

// viewsPickle: a state dict of 20 levels, each holding the level below
// twice: 2^20 names for one tensor, a million views.
func viewsPickle() []byte {
	p := &pickler{b: []byte{0x80, 2}}
	var level func(l int)
	level = func(l int) {
		if l == 0 {
			p.op('}').str("w").tensor().op('s', 'q', 0)
			return
		}
		p.op('}', '(').str("a")
		level(l - 1)
		p.str("b").op('h', byte(l-1), 'u', 'q', byte(l))
	}
	level(20)
	return p.op('.').b
}

// byteArrayGGUF is a GGUF v3 file with one F32 tensor and a u8 array
// key/value of n elements.
func byteArrayGGUF(n int) []byte {
	le := binary.LittleEndian
	str := func(b []byte, s string) []byte { return append(le.AppendUint64(b, uint64(len(s))), s...) }
	b := le.AppendUint64(le.AppendUint64(le.AppendUint32([]byte("GGUF"), 3), 1), 2)
	b = str(le.AppendUint32(str(b, "general.architecture"), 8), "llama")
	b = le.AppendUint64(le.AppendUint32(le.AppendUint32(str(b, "x.blob"), 9), 0), uint64(n))
	for i := range n {
		b = append(b, byte(i))
	}
	b = le.AppendUint64(le.AppendUint32(le.AppendUint64(le.AppendUint32(str(b, "t"), 1), 4), 0), 0)
	for len(b)%32 != 0 {
		b = append(b, 0)
	}
	return append(b, make([]byte, 16)...)
}

// TestMemoryBoundedByInput runs the binary under a memory limit on inputs
// that are small on disk and were huge in memory: the hostile checkpoints
// are refused with size_limit_exceeded naming the budget's flag at a small
// peak RSS, a GGUF with a large byte-array key/value is added and shown
// (summarised) at a peak RSS proportional to it, and --max-parse-memory
// refuses what passes its cap.
func TestMemoryBoundedByInput(t *testing.T) {
	c := newCLI(t)
	dir := t.TempDir()
	for _, h := range []struct{ name, file string }{
		{"tuple key", "tuple.pt"},
		{"a million views", "views.pt"},
	} {
		t.Run(h.name, func(t *testing.T) {
			pkl := map[string][]byte{"tuple.pt": tupleKeyPickle(), "views.pt": viewsPickle()}[h.file]
			p := writeFile(t, filepath.Join(dir, h.file), torchCheckpointWith(pkl, map[string][]byte{"0": make([]byte, 16)}))
			r, peak := c.limited("--json", "add", p)
			t.Logf("%s: %d-byte file, exit %d, peak RSS %d MiB", h.name, len(pkl), r.code, peak>>20)
			if r.code != exitCodes["size_limit_exceeded"] || !strings.Contains(r.stderr, "size_limit_exceeded") || !strings.Contains(r.stderr, "--max-parse-memory") {
				t.Fatalf("want size_limit_exceeded naming --max-parse-memory:\n%s", r)
			}
			if peak > 200<<20 {
				t.Errorf("peak RSS %d MiB, want at most 200 MiB", peak>>20)
			}
		})
	}
	t.Run("gguf byte array", func(t *testing.T) {
		n := 8_000_000
		p := writeFile(t, filepath.Join(dir, "blob.gguf"), byteArrayGGUF(n))
		for _, args := range [][]string{{"add", p, "--name", "g"}, {"show", "g"}, {"--json", "show", "g"}} {
			r, peak := c.limited(args...)
			t.Logf("%s: exit %d, peak RSS %d MiB", strings.Join(args, " "), r.code, peak>>20)
			if r.code != 0 {
				t.Fatalf("failed:\n%s", r)
			}
			if peak > 400<<20 {
				t.Errorf("%s: peak RSS %d MiB for an %d-byte key/value, want at most 400 MiB", args[0], peak>>20, n)
			}
			if args[0] == "show" && (len(r.stdout) > 4096 || !strings.Contains(r.stdout, fmt.Sprintf("arr[u8,%d]", n))) {
				t.Errorf("show does not summarise the byte array (%d bytes of output):\n%.2000s", len(r.stdout), r.stdout)
			}
		}
	})
	t.Run("--max-parse-memory", func(t *testing.T) {
		var ts []tensor
		for i := range 2000 {
			ts = append(ts, randTensor(fmt.Sprintf("model.layers.%d.weight", i), "F32", uint64(i), 1))
		}
		p := writeFile(t, filepath.Join(dir, "many.safetensors"), safetensorsFile(ts, nil))
		msg := c.fail("size_limit_exceeded", "add", p, "--max-parse-memory", "64KiB")
		if !strings.Contains(msg, "--max-parse-memory 64KiB") {
			t.Errorf("refusal does not name the flag and its value: %s", msg)
		}
		c.ok("add", p, "--name", "many")
	})
}

// torchCheckpointWith is torchCheckpoint with storages data/KEY.
func torchCheckpointWith(pkl []byte, storages map[string][]byte) []byte {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	add := func(name string, data []byte) {
		f, err := w.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		if err != nil {
			panic(err)
		}
		f.Write(data)
	}
	add("archive/data.pkl", pkl)
	add("archive/byteorder", []byte("little"))
	for k, b := range storages {
		add("archive/data/"+k, b)
	}
	add("archive/version", []byte("3\n"))
	if err := w.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}
