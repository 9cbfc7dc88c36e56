package restorer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/pytorch"
	"github.com/mstore/mstore/internal/formats/safetensors"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

// tensorBytes parses the files under dir with codec and returns each
// tensor's bytes by name.
func tensorBytes(t *testing.T, codec formats.Codec, dir string) map[string]string {
	t.Helper()
	files := readTree(t, dir)
	l, err := codec.Parse(formattest.NewMemDir(files), formattest.ClaimedPaths(codec, files))
	if err != nil {
		t.Fatal(err)
	}
	data, err := formattest.TensorData(l, files)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for i, tn := range l.Tensors {
		out[tn.Name] = tn.DType + ":" + string(data[i])
	}
	return out
}

func sameTensors(t *testing.T, want, got map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d tensors, want %d", len(got), len(want))
	}
	for name, b := range want {
		if got[name] != b {
			t.Fatalf("tensor %s differs", name)
		}
	}
}

// A SafeTensors version checked out as PyTorch holds the same tensors, in
// one file or in shards with their index, and converts back.
func TestPyTorchPlanner(t *testing.T) {
	st, dir, d := added(t, testmodel.Spec{Layers: 2, Hidden: 16, Vocab: 64, DType: "BF16", Seed: 4})
	want := tensorBytes(t, safetensors.Codec, dir)
	one := filepath.Join(t.TempDir(), "one")
	if _, err := Checkout(context.Background(), st, d, one, Options{Format: "pytorch"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(one, pytorch.DefaultFile)); err != nil {
		t.Fatal(err)
	}
	sameTensors(t, want, tensorBytes(t, pytorch.Codec, one))

	shards := filepath.Join(t.TempDir(), "shards")
	if _, err := Checkout(context.Background(), st, d, shards, Options{Format: "pytorch", WriteOptions: formats.WriteOptions{MaxShardSize: 3000}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(shards, "pytorch_model.bin.index.json")); err != nil {
		t.Fatal(err)
	}
	sameTensors(t, want, tensorBytes(t, pytorch.Codec, shards))

	// The checkpoint added back, and checked out as SafeTensors again.
	st2, err := store.Open(filepath.Join(t.TempDir(), "store"), true, store.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	res, err := archiver.Add(context.Background(), st2, shards, archiver.Options{Name: "pt"})
	if err != nil {
		t.Fatal(err)
	}
	back := filepath.Join(t.TempDir(), "back")
	if _, err := Checkout(context.Background(), st2, res.Digest, back, Options{Format: "safetensors"}); err != nil {
		t.Fatal(err)
	}
	sameTensors(t, want, tensorBytes(t, safetensors.Codec, back))
}

// What a checkpoint of plain tensors cannot keep is refused unless
// --drop-non-tensors: SafeTensors __metadata__ beyond {"format": "pt"}.
func TestPyTorchPlannerLosses(t *testing.T) {
	spec := testmodel.Spec{Layers: 1, Hidden: 8, Vocab: 16, DType: "F32", Seed: 2}
	tensors := spec.Tensors()
	l, err := safetensors.Plan(tensors, safetensors.PlanOptions{Metadata: map[string]string{"format": "pt", "note": "trained on X"}})
	if err != nil {
		t.Fatal(err)
	}
	data := make([][]byte, len(tensors))
	for i, tn := range tensors {
		data[i] = make([]byte, tn.Size)
	}
	files, err := formattest.Materialize(l, data)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "model")
	if err := testmodel.Write(dir, files); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "store"), true, store.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	res, err := archiver.Add(context.Background(), st, dir, archiver.Options{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	_, err = Checkout(context.Background(), st, res.Digest, filepath.Join(parent, "refused"), Options{Format: "pytorch"})
	if !errors.Is(err, errs.LossyConversion) {
		t.Fatalf("err = %v, want lossy_conversion naming __metadata__", err)
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Fatalf("a refused conversion left %v", left)
	}
	if _, err := Checkout(context.Background(), st, res.Digest, filepath.Join(parent, "ok"), Options{Format: "pytorch", WriteOptions: formats.WriteOptions{DropNonTensors: true}}); err != nil {
		t.Fatal(err)
	}
}
