package restorer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/testmodel"
)

// addSpec adds spec's model to st under name and returns its directory and
// digest.
func addSpec(t *testing.T, st *store.Store, spec testmodel.Spec, name string) (string, objects.Digest) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	files, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := testmodel.Write(dir, files); err != nil {
		t.Fatal(err)
	}
	res, err := archiver.Add(context.Background(), st, dir, archiver.Options{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return dir, res.Digest
}

// twoVersions is a store with two versions whose files differ in names.
func twoVersions(t *testing.T) (st *store.Store, dirA, dirB string, a, b objects.Digest) {
	t.Helper()
	st, dirA, a = added(t, testmodel.Tiny) // sharded
	dirB, b = addSpec(t, st, testmodel.Spec{Layers: 1, Hidden: 16, Vocab: 64, DType: "BF16", Seed: 7}, "b")
	return st, dirA, dirB, a, b
}

// snapshotTree is every path under dir with its bytes ("/" for a
// directory, "-> T" for a link).
func snapshotTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "-> " + target
		case info.IsDir():
			out[rel] = "/"
		default:
			b, err := os.ReadFile(p)
			out[rel] = string(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func entriesOf(t *testing.T, dir string) []string {
	t.Helper()
	list, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list {
		out = append(out, e.Name())
	}
	return out
}

func TestForceReplacesEarlierCheckout(t *testing.T) {
	st, dirA, dirB, a, b := twoVersions(t)
	parent := t.TempDir()
	dest := filepath.Join(parent, "out")
	if _, err := Checkout(context.Background(), st, a, dest, Options{}); err != nil {
		t.Fatal(err)
	}
	sameTree(t, dirA, dest)
	if _, err := Checkout(context.Background(), st, b, dest, Options{}); errs.ClassOf(err) != errs.Conflict || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("without --force: %v, want conflict naming --force", err)
	}
	before, _ := os.Lstat(dest)
	if _, err := Checkout(context.Background(), st, b, dest, Options{Force: true}); err != nil {
		t.Fatal(err)
	}
	sameTree(t, dirB, dest) // the sharded files of A are gone
	if after, _ := os.Lstat(dest); os.SameFile(before, after) {
		t.Fatal("DEST is the same directory: it was not swapped")
	}
	if got := entriesOf(t, parent); !reflect.DeepEqual(got, []string{"out"}) {
		t.Fatalf("beside DEST: %v", got)
	}
	// The new checkout is recorded, the replaced one's record is gone, and
	// it can be replaced in turn (back to A, through a link to the parent).
	key, _ := canonicalDest(dest)
	if names, _ := st.CheckoutRecordNames(recordPrefix(key)); len(names) != 1 {
		t.Fatalf("records for DEST: %v, want one", names)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(parent, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Checkout(context.Background(), st, a, filepath.Join(link, "out"), Options{Force: true}); err != nil {
		t.Fatal(err)
	}
	sameTree(t, dirA, dest)
}

func TestForceRefusesWhatMstoreDidNotWrite(t *testing.T) {
	cases := []struct {
		name  string
		spoil func(t *testing.T, dest string)
		names []string // in the message
	}{
		{"foreign file", func(t *testing.T, dest string) {
			os.WriteFile(filepath.Join(dest, "notes.txt"), []byte("mine"), 0o644)
		}, []string{"notes.txt", "did not write"}},
		{"foreign file with a checkout-like name", func(t *testing.T, dest string) {
			os.WriteFile(filepath.Join(dest, "model-00001-of-00002.safetensors.bak"), []byte("x"), 0o644)
		}, []string{"model-00001-of-00002.safetensors.bak"}},
		{"foreign empty directory", func(t *testing.T, dest string) {
			os.Mkdir(filepath.Join(dest, "runs"), 0o755)
		}, []string{"runs"}},
		{"foreign link", func(t *testing.T, dest string) {
			os.Symlink("/etc", filepath.Join(dest, "etc"))
		}, []string{`"etc"`}},
		{"a checked-out file replaced by a link", func(t *testing.T, dest string) {
			p := filepath.Join(dest, "config.json")
			os.Remove(p)
			os.Symlink("/etc/passwd", p)
		}, []string{"config.json"}},
		{"edited, same size, mtime restored", func(t *testing.T, dest string) {
			p := filepath.Join(dest, "config.json")
			info, _ := os.Stat(p)
			b, _ := os.ReadFile(p)
			b[0] = '['
			time.Sleep(10 * time.Millisecond) // let the ctime move on
			os.WriteFile(p, b, 0o644)
			os.Chtimes(p, info.ModTime(), info.ModTime())
		}, []string{"config.json", "changed"}},
		{"appended to", func(t *testing.T, dest string) {
			f, _ := os.OpenFile(filepath.Join(dest, "tokenizer.json"), os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString(" ")
			f.Close()
		}, []string{"tokenizer.json", "changed"}},
		{"replaced by a copy", func(t *testing.T, dest string) {
			p := filepath.Join(dest, "config.json")
			b, _ := os.ReadFile(p)
			os.Remove(p)
			os.WriteFile(p, b, 0o644)
		}, []string{"config.json"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, _, _, a, b := twoVersions(t)
			parent := t.TempDir()
			dest := filepath.Join(parent, "out")
			if _, err := Checkout(context.Background(), st, a, dest, Options{}); err != nil {
				t.Fatal(err)
			}
			tc.spoil(t, dest)
			want := snapshotTree(t, dest)
			_, err := Checkout(context.Background(), st, b, dest, Options{Force: true})
			if errs.ClassOf(err) != errs.Conflict {
				t.Fatalf("err = %v, want conflict", err)
			}
			for _, n := range tc.names {
				if !strings.Contains(err.Error(), n) {
					t.Errorf("message does not name %q: %v", n, err)
				}
			}
			if got := snapshotTree(t, dest); !reflect.DeepEqual(got, want) {
				t.Fatalf("refused checkout changed DEST:\n%v\nwant\n%v", got, want)
			}
			if got := entriesOf(t, parent); !reflect.DeepEqual(got, []string{"out"}) {
				t.Fatalf("beside DEST: %v", got)
			}
		})
	}
}

func TestForceRefusesOtherDestinations(t *testing.T) {
	st, dirA, _, a, _ := twoVersions(t)
	parent := t.TempDir()

	file := filepath.Join(parent, "a-file")
	os.WriteFile(file, []byte("x"), 0o644)
	for _, force := range []bool{false, true} {
		if _, err := Checkout(context.Background(), st, a, file, Options{Force: force}); errs.ClassOf(err) != errs.Conflict || !strings.Contains(err.Error(), "not a directory") {
			t.Fatalf("onto a regular file (force %v): %v, want conflict", force, err)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "x" {
		t.Fatal("the file was changed")
	}

	target := filepath.Join(parent, "target")
	os.Mkdir(target, 0o755)
	link := filepath.Join(parent, "link")
	os.Symlink(target, link)
	if _, err := Checkout(context.Background(), st, a, link, Options{Force: true}); errs.ClassOf(err) != errs.Conflict {
		t.Fatalf("onto a link: %v, want conflict", err)
	}

	// A copy of a checkout that this store did not write is not a checkout.
	mine := filepath.Join(parent, "mine")
	os.CopyFS(mine, os.DirFS(dirA))
	_, err := Checkout(context.Background(), st, a, mine, Options{Force: true})
	if errs.ClassOf(err) != errs.Conflict || !strings.Contains(err.Error(), "config.json") {
		t.Fatalf("onto an unrecorded copy: %v, want conflict naming its files", err)
	}
	// An empty directory needs no --force and is replaced.
	empty := filepath.Join(parent, "empty")
	os.Mkdir(empty, 0o755)
	if _, err := Checkout(context.Background(), st, a, empty, Options{}); err != nil {
		t.Fatal(err)
	}
	sameTree(t, dirA, empty)
	want := []string{"a-file", "empty", "link", "mine", "target"}
	if got := entriesOf(t, parent); !reflect.DeepEqual(got, want) {
		t.Fatalf("beside DEST: %v, want %v", got, want)
	}
}

// withExchange replaces the directory swap for one test.
func withExchange(t *testing.T, fn func(real func(a, b string) error, a, b string) error) {
	real := exchange
	exchange = func(a, b string) error { return fn(real, a, b) }
	t.Cleanup(func() { exchange = real })
}

// TestExchangeRace: DEST swapped for another directory between the last
// check and the exchange is put back and refused; a swap back that fails
// is reported with where each tree is, and nothing is deleted.
func TestExchangeRace(t *testing.T) {
	for _, rollbackFails := range []bool{false, true} {
		t.Run(map[bool]string{false: "rollback", true: "rollback fails"}[rollbackFails], func(t *testing.T) {
			st, dirA, _, a, b := twoVersions(t)
			parent := t.TempDir()
			dest := filepath.Join(parent, "out")
			if _, err := Checkout(context.Background(), st, a, dest, Options{}); err != nil {
				t.Fatal(err)
			}
			calls := 0
			withExchange(t, func(real func(a, b string) error, x, y string) error {
				calls++
				switch {
				case calls == 1: // someone moves the checkout away and makes their own DEST
					os.Rename(dest, filepath.Join(parent, "moved"))
					os.Mkdir(dest, 0o755)
					os.WriteFile(filepath.Join(dest, "theirs.txt"), []byte("theirs"), 0o644)
				case rollbackFails:
					return errors.New("injected: exchange failed")
				}
				return real(x, y)
			})
			_, err := Checkout(context.Background(), st, b, dest, Options{Force: true})
			if errs.ClassOf(err) != errs.Conflict || !strings.Contains(err.Error(), "replaced by another directory") {
				t.Fatalf("err = %v, want conflict", err)
			}
			sameTree(t, dirA, filepath.Join(parent, "moved"))
			if !rollbackFails {
				if calls != 2 || !strings.Contains(err.Error(), "as it was") {
					t.Fatalf("%d exchanges, err %v", calls, err)
				}
				if got := snapshotTree(t, dest); got["theirs.txt"] != "theirs" || len(got) != 2 {
					t.Fatalf("DEST after the rollback: %v", got)
				}
				if got := entriesOf(t, parent); !reflect.DeepEqual(got, []string{"moved", "out"}) {
					t.Fatalf("beside DEST: %v", got)
				}
				return
			}
			if !strings.Contains(err.Error(), "putting") || !strings.Contains(err.Error(), "injected") {
				t.Fatalf("the failed rollback is not reported: %v", err)
			}
			// Their directory is where the message says, whole.
			var kept string
			for _, n := range entriesOf(t, parent) {
				if strings.HasPrefix(n, tempPrefix) && !strings.HasSuffix(n, lockSuffix) {
					kept = filepath.Join(parent, n)
				}
			}
			if kept == "" || !strings.Contains(err.Error(), kept) {
				t.Fatalf("their tree is not named in %v (entries %v)", err, entriesOf(t, parent))
			}
			if b, _ := os.ReadFile(filepath.Join(kept, "theirs.txt")); string(b) != "theirs" {
				t.Fatal("their file is gone")
			}
		})
	}
}

// TestFilesAppearingInTheReplacedTree: a file written into the old tree
// just as it is swapped out is kept (under a visible name) and reported.
func TestFilesAppearingInTheReplacedTree(t *testing.T) {
	st, _, dirB, a, b := twoVersions(t)
	parent := t.TempDir()
	dest := filepath.Join(parent, "out")
	if _, err := Checkout(context.Background(), st, a, dest, Options{}); err != nil {
		t.Fatal(err)
	}
	withExchange(t, func(real func(a, b string) error, x, y string) error {
		if err := real(x, y); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(x, "late.txt"), []byte("late"), 0o644) // x now holds the old tree
	})
	_, err := Checkout(context.Background(), st, b, dest, Options{Force: true})
	if errs.ClassOf(err) != errs.Conflict || !strings.Contains(err.Error(), "late.txt") {
		t.Fatalf("err = %v, want conflict naming late.txt", err)
	}
	sameTree(t, dirB, dest)
	var aside []string
	for _, n := range entriesOf(t, parent) {
		if n != "out" {
			aside = append(aside, n)
		}
	}
	if len(aside) != 1 || !strings.HasPrefix(aside[0], "out.mstore-replaced-") {
		t.Fatalf("beside DEST: %v", aside)
	}
	if got := snapshotTree(t, filepath.Join(parent, aside[0])); !reflect.DeepEqual(got, map[string]string{".": "/", "late.txt": "late"}) {
		t.Fatalf("kept: %v, want only late.txt", got)
	}
}

// TestRecordWriteFailure: a store that cannot be written (a read-only
// mount) still checks out, saying that the checkout is not recorded (so
// --force will refuse it); any other failure to record fails the checkout
// and leaves nothing at or beside DEST.
func TestRecordWriteFailure(t *testing.T) {
	st, dir, d := added(t, testmodel.Tiny)
	for _, errno := range []syscall.Errno{syscall.EROFS, syscall.EIO} {
		t.Run(errno.Error(), func(t *testing.T) {
			faulty, err := store.Open(st.Dir(), false, store.Options{FS: mkdirFails{errno: errno}})
			if err != nil {
				t.Fatal(err)
			}
			parent := t.TempDir()
			dest := filepath.Join(parent, "out")
			res, err := Checkout(context.Background(), faulty, d, dest, Options{})
			if errno == syscall.EIO {
				if !errors.Is(err, syscall.EIO) {
					t.Fatalf("err = %v, want the EIO", err)
				}
				if got := entriesOf(t, parent); len(got) != 0 {
					t.Fatalf("left %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sameTree(t, dir, dest)
			if !strings.Contains(res.Note, "not recorded") {
				t.Fatalf("note %q", res.Note)
			}
			if _, err := Checkout(context.Background(), st, d, dest, Options{Force: true}); errs.ClassOf(err) != errs.Conflict {
				t.Fatalf("--force over an unrecorded checkout: %v, want conflict", err)
			}
		})
	}
}

// mkdirFails is the real file system, except that creating a directory
// fails with errno.
type mkdirFails struct {
	store.OSFS
	errno syscall.Errno
}

func (f mkdirFails) MkdirAll(string) error { return f.errno }
