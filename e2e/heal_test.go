package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
)

// blobOf returns the record of the first chunk of tensor name in version ref.
func (c *cli) blobOf(ref, name string) store.BlobRecord {
	c.t.Helper()
	var chunk string
	for _, tn := range c.show(ref).Manifest.Tensors {
		if tn.Name == name {
			chunk = tn.Chunks[0]
		}
	}
	d, err := objects.ParseDigest(chunk)
	if err != nil {
		c.t.Fatalf("tensor %s of %s: %v", name, ref, err)
	}
	st, err := store.Open(c.store, false, store.Options{LockTimeout: 10 * time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	var rec store.BlobRecord
	err = st.View(func(tx *bolt.Tx) error {
		var ok bool
		rec, ok, err = store.Blob(tx, d)
		if !ok && err == nil {
			c.t.Fatalf("blob %s is not recorded", d.Short())
		}
		return err
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return rec
}

// TestHealCorruptBlob rots a loose blob, a packed blob, and deletes a blob
// file; fsck must name each with the versions, files and tensors it breaks
// and say how to heal it; re-adding the source must rewrite it (not "0 B
// new"), after which fsck is clean and checkout byte-identical.
func TestHealCorruptBlob(t *testing.T) {
	t.Parallel()
	dirs, trees := crashModels(t, t.TempDir(), 2)
	for _, how := range []string{"loose flipped", "packed flipped", "loose deleted"} {
		t.Run(how, func(t *testing.T) {
			c := newCLI(t)
			c.add(dirs[0], "--name", "m", "--tag", "v1")
			c.add(dirs[1], "--name", "n")
			tensor := "embed.weight" // 1.25 MiB: a loose blob
			if how == "packed flipped" {
				tensor = "layers.1.weight" // 4 KiB, only in model 0: packed
			}
			rec := c.blobOf("m:v1", tensor)
			st, _ := store.Open(c.store, false, store.Options{})
			switch how {
			case "loose flipped":
				flip(t, st.BlobPath(rec.Digest), rec.Size/2, 0x10)
			case "packed flipped":
				flip(t, st.PackPath(rec.Pack), rec.Offset+rec.Size/2, 0x10)
			case "loose deleted":
				os.Remove(st.BlobPath(rec.Digest))
			}

			r := c.run("--json", "fsck")
			var rep fsckReport
			json.Unmarshal([]byte(r.stdout), &rep)
			if r.code != exitCodes["integrity_error"] {
				t.Fatalf("fsck of a store with a bad blob:\n%s", r)
			}
			i := slices.IndexFunc(append(rep.Corrupt, rep.Missing...), func(f store.Finding) bool { return f.ID == rec.Digest.String() })
			if i < 0 {
				t.Fatalf("fsck does not name blob %s:\n%s", rec.Digest.Short(), r)
			}
			f := append(rep.Corrupt, rep.Missing...)[i]
			affects := strings.Join(f.Affects, "\n")
			if !strings.Contains(affects, "m:v1") || !strings.Contains(affects, `tensor "`+tensor+`"`) || f.Heal == "" || !strings.Contains(f.Heal, "mstore add") {
				t.Errorf("fsck does not say what the blob breaks and how to heal it: %+v", f)
			}
			human := c.run("fsck")
			if !strings.Contains(human.stdout, tensor) || !strings.Contains(human.stdout, "to heal") {
				t.Errorf("fsck's text does not name the tensor and the cure:\n%s", human)
			}
			c.fail("integrity_error", "checkout", "m:v1", filepath.Join(t.TempDir(), "out"))

			res := c.add(dirs[0], "--name", "m")
			if res.NewBytes < rec.Size {
				t.Errorf("the re-add wrote %d new bytes: the %d-byte bad blob was not rewritten", res.NewBytes, rec.Size)
			}
			c.fsck()
			c.requireCheckout("m:v1", trees[0])
			c.requireCheckout("n", trees[1])
			if res := c.add(dirs[0], "--name", "m"); res.NewBytes != 0 {
				t.Errorf("a third add of a healthy store wrote %d bytes", res.NewBytes)
			}
		})
	}
}

// TestUnreadableVersion plants a version whose manifest does not decode
// (its digest matches its bytes) and names it with a ref: fsck, du and gc
// must report it, do their work on the rest, and gc must delete no blob
// (it cannot tell which ones that version needs).
func TestUnreadableVersion(t *testing.T) {
	t.Parallel()
	dirs, trees := crashModels(t, t.TempDir(), 2)
	c := newCLI(t)
	c.add(dirs[0], "--name", "m")
	x := c.add(dirs[1], "--name", "x").Digest
	c.ok("rm", "x") // x's own blobs are garbage now
	bad := []byte(`{"schema":1,"format":"safetensors","files":"not a list"}`)
	badDigest := objects.Sum(bad)
	st, err := store.Open(c.store, false, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(func(tx *bolt.Tx) error {
		if err := store.PutManifest(tx, badDigest, bad); err != nil {
			return err
		}
		_, err := refs.Move(tx, "broken", badDigest, "planted", time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	objectsBefore := listFiles(t, filepath.Join(c.store, "objects"))

	r := c.run("--json", "fsck")
	var rep fsckReport
	json.Unmarshal([]byte(r.stdout), &rep)
	if r.code != exitCodes["integrity_error"] || !slices.ContainsFunc(rep.Corrupt, func(f store.Finding) bool {
		return f.Kind == "manifest" && f.ID == badDigest.String()
	}) || rep.Blobs == 0 {
		t.Errorf("fsck must name the unreadable version and check the rest:\n%s", r)
	}
	if slices.ContainsFunc(rep.Unreferenced, func(f store.Finding) bool { return f.Kind == "blob" }) {
		t.Errorf("fsck calls blobs unreferenced while a version it cannot read may need them:\n%s", r)
	}

	r = c.run("--json", "du")
	var u struct {
		duResult
		Unreadable []struct {
			Version string `json:"version"`
		} `json:"unreadable"`
	}
	json.Unmarshal([]byte(r.stdout), &u)
	if r.code != exitCodes["integrity_error"] || u.Versions != 3 || u.LogicalBytes == 0 || len(u.Unreadable) != 1 || u.Unreadable[0].Version != badDigest.String() {
		t.Errorf("du must count the rest and name the unreadable version:\n%s", r)
	}

	r = c.run("gc", "--grace", "0")
	if r.code != exitCodes["integrity_error"] || !strings.Contains(r.stderr, badDigest.String()) {
		t.Errorf("gc must name the unreadable version and fail:\n%s", r)
	}
	if after := listFiles(t, filepath.Join(c.store, "objects")); !equalStrings(after, objectsBefore) {
		t.Errorf("gc deleted blob files while a version it cannot read is named: %v", diffStrings(objectsBefore, after))
	}
	c.fail("not_found", "show", x) // what no name reaches is still removed
	c.requireCheckout("m", trees[0])

	c.ok("rm", "broken")
	c.ok("gc", "--grace", "0")
	if after := listFiles(t, filepath.Join(c.store, "objects")); equalStrings(after, objectsBefore) {
		t.Errorf("once the unreadable version is gone, gc frees nothing")
	}
	c.fsck()
	c.requireCheckout("m", trees[0])
}
