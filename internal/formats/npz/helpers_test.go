package npz_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/npz"
	"github.com/mstore/mstore/internal/testenv"
)

const python = "/usr/bin/python3" // Debian's, with python3-numpy

// numpyRun runs a Python script with numpy imported as np in dir, and
// returns its output.
func numpyRun(t *testing.T, dir, script string) string {
	t.Helper()
	if err := exec.Command(python, "-c", "import numpy").Run(); err != nil {
		testenv.Missing(t, "%s has no numpy (python3-numpy): the NumPy checks are skipped", python)
	}
	cmd := exec.Command(python, "-c", "import numpy as np, sys\n"+script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s\n%s", err, script, out)
	}
	return string(out)
}

// readDir reads every file under dir by slash path.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// parse parses the files the codec claims.
func parse(t *testing.T, files map[string][]byte) (names map[string]int, data map[string][]byte, dtypes map[string]string) {
	t.Helper()
	l, err := npz.Codec.Parse(formattest.NewMemDir(files), formattest.ClaimedPaths(npz.Codec, files))
	if err != nil {
		t.Fatal(err)
	}
	if err := formattest.CheckLayout(l, files); err != nil {
		t.Fatal(err)
	}
	raw, err := formattest.TensorData(l, files)
	if err != nil {
		t.Fatal(err)
	}
	names, data, dtypes = map[string]int{}, map[string][]byte{}, map[string]string{}
	for i, tn := range l.Tensors {
		names[tn.Name] = i
		data[tn.Name] = raw[i]
		dtypes[tn.Name] = tn.DType
	}
	return names, data, dtypes
}

func lines(s string) []string { return strings.Fields(strings.TrimSpace(s)) }

// decoded is the decoded stream of a deflated .npz (formats.Decoder).
func decoded(t testing.TB, files map[string][]byte, name string) []byte {
	t.Helper()
	rc, err := npz.Codec.(formats.Decoder).Decode(formattest.NewMemDir(files), name)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("a parsed archive does not decode: %v", err)
	}
	return b
}
