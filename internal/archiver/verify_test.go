package archiver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/modeldir"
	"github.com/mstore/mstore/internal/testmodel"
)

// stageRewritten runs add's steps up to the check of what was stored, with
// the file rewritten (same size) after the first parse ("parsed"), after
// the hashing ("stored"), or never (""). The files' state is taken again
// after the rewrite, as if no stat could see it (a filesystem with coarse
// timestamps, a write through a shared mapping): what must catch it is the
// check of the stored bytes alone.
func stageRewritten(t *testing.T, rw testmodel.Rewrite, when string) error {
	t.Helper()
	path := writeFile(t, filepath.Join(t.TempDir(), rw.File), rw.Original)
	dir, err := modeldir.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	codec, claimed, err := chooseCodec(dir, path)
	if err != nil {
		t.Fatal(err)
	}
	before, err := statAll(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := checkedDir{Dir: dir, before: before}
	rewrite := func() {
		writeFile(t, path, rw.Rewritten)
		now, err := statAll(dir)
		if err != nil {
			t.Fatal(err)
		}
		before.m = now.m
	}
	layout, parsed, err := parse(codec, src, claimed)
	if err != nil {
		t.Fatal(err)
	}
	if when == "parsed" {
		rewrite()
	}
	files, err := withOtherFiles(dir, layout, claimed)
	if err != nil {
		t.Fatal(err)
	}
	st := newStore(t)
	w := st.NewBlobWriter(nil)
	defer w.Abort()
	decoded, err := decoders(codec, src, layout, st, parsed)
	if err != nil {
		t.Fatal(err)
	}
	pool := newReaderPool(src, decoded)
	defer pool.close()
	h, err := hashAndStore(context.Background(), pool, layout, files, w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if when == "stored" {
		rewrite()
	}
	return verifyStored(codec, claimed, layout, files, h, pool)
}

func writeFile(t *testing.T, p string, b []byte) string {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStoredBytesAreTheParsedOnes: a file rewritten at the same size after
// it was parsed (a SafeTensors header, a GGUF key/value, a checkpoint whose
// data.pkl now calls posix.system) is refused with integrity_error, even
// when its state looks unchanged, and so is one rewritten after hashing.
func TestStoredBytesAreTheParsedOnes(t *testing.T) {
	rws, err := testmodel.Rewrites("true")
	if err != nil {
		t.Fatal(err)
	}
	for _, rw := range rws {
		t.Run(rw.Format, func(t *testing.T) {
			if rw.Format == "pytorch" {
				// The rewrite is what an attacker would put there: added
				// on its own, it is refused.
				_, err := Add(context.Background(), newStore(t), writeFile(t, filepath.Join(t.TempDir(), rw.File), rw.Rewritten), Options{Name: "m"})
				if errs.ClassOf(err) != errs.SchemaError || !strings.Contains(err.Error(), "posix.system") {
					t.Fatalf("the rewritten checkpoint added on its own: %v, want schema_error naming posix.system", err)
				}
			}
			if err := stageRewritten(t, rw, ""); err != nil {
				t.Fatalf("an unchanged %s file: %v", rw.Format, err)
			}
			for _, when := range []string{"parsed", "stored"} {
				err := stageRewritten(t, rw, when)
				if errs.ClassOf(err) != errs.IntegrityError || !strings.Contains(err.Error(), "changed while it was being added") {
					t.Errorf("rewritten once %s: %v, want integrity_error saying it changed", when, err)
					continue
				}
				if rw.Format == "pytorch" && when == "parsed" && !strings.Contains(err.Error(), "posix.system") {
					t.Errorf("the hostile data.pkl is not named as the reason: %v", err)
				}
			}
		})
	}
}
