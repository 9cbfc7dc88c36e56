package restorer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/testmodel"
)

// Each piece is pointed at its record by one lookup of all of them
// (openBlobs): a checkout is the model byte for byte, as added and
// re-laid-out, and a record missing, of the first tensor or the last,
// fails it with integrity_error and leaves nothing.
func TestCheckoutFindsEachPieceItsRecord(t *testing.T) {
	st, dir, d := added(t, testmodel.Tiny)
	want := readTree(t, dir)
	parent := t.TempDir()
	for i, opts := range []Options{{}, {WriteOptions: formats.WriteOptions{MaxShardSize: 20_000}}} {
		out := filepath.Join(parent, "ok", string(rune('a'+i)))
		if _, err := Checkout(context.Background(), st, d, out, opts); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			got := readTree(t, out)
			for p, b := range want {
				if string(got[p]) != string(b) {
					t.Fatalf("%s differs", p)
				}
			}
		}
	}
	var m *objects.Manifest
	st.View(func(tx *bolt.Tx) (err error) { m, err = st.Manifest(tx, d); return })
	for _, victim := range []objects.Digest{m.Tensors[0].Chunks[0], m.Tensors[len(m.Tensors)-1].Chunks[0]} {
		st2, _, d2 := added(t, testmodel.Tiny)
		if d2 != d {
			t.Fatal("the same model added twice has two digests")
		}
		if err := st2.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("blobs")).Delete(victim[:]) }); err != nil {
			t.Fatal(err)
		}
		bad := t.TempDir()
		for _, opts := range []Options{{}, {WriteOptions: formats.WriteOptions{MaxShardSize: 20_000}}} {
			_, err := Checkout(context.Background(), st2, d, filepath.Join(bad, "out"), opts)
			if !errors.Is(err, errs.IntegrityError) {
				t.Fatalf("blob %s unrecorded: err = %v, want integrity_error", victim.Short(), err)
			}
			if left, _ := os.ReadDir(bad); len(left) != 0 {
				t.Fatalf("left behind: %v", left)
			}
		}
	}
}
