package hfcache

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/layouts/layout"
	"github.com/mstore/mstore/internal/objects"
)

// lfsThreshold is the size from which the hub keeps any file in LFS.
const lfsThreshold = 10 << 20

// lfsPatterns are the file patterns of the hub's default .gitattributes
// (what a new repo tracks in LFS), matched against the base name.
var lfsPatterns = []string{"*.7z", "*.arrow", "*.bin", "*.bz2", "*.ckpt", "*.ftz", "*.gguf", "*.gz", "*.h5",
	"*.joblib", "*.lfs.*", "*.mlmodel", "*.model", "*.msgpack", "*.npy", "*.npz", "*.onnx", "*.ot", "*.parquet",
	"*.pb", "*.pickle", "*.pkl", "*.pt", "*.pth", "*.rar", "*.safetensors", "*.tar.*", "*.tflite", "*.tgz",
	"*.wasm", "*.xz", "*.zip", "*.zst", "*tfevents*"}

// IsLFS reports whether the hub keeps the file p of size bytes in LFS
// (then its blob is named by its SHA-256, else by its git blob id).
func IsLFS(p string, size int64) bool {
	if size >= lfsThreshold || strings.HasPrefix(p, "saved_model/") {
		return true
	}
	base := strings.ToLower(path.Base(p))
	for _, pat := range lfsPatterns {
		if ok, _ := path.Match(pat, base); ok {
			return true
		}
	}
	return false
}

// SHA256 names an LFS blob.
func SHA256(int64) hash.Hash { return sha256.New() }

// GitBlob names any other blob: git's object id, the SHA-1 of a header
// and the content.
func GitBlob(size int64) hash.Hash {
	h := sha1.New()
	h.Write([]byte("blob " + strconv.FormatInt(size, 10) + "\x00"))
	return h
}

// Write lays m out as a snapshot of its repo under the hub folder dest.
func (hfCache) Write(m layout.Model, dest string, opts layout.WriteOptions) (*layout.Written, error) {
	id, rev, refNames, err := naming(m)
	if err != nil {
		return nil, err
	}
	repo := filepath.Join(dest, repoFolder(id))
	snap := filepath.Join(repo, "snapshots", rev)
	if err := layout.RealDirs(dest, repo, filepath.Join(repo, "blobs"), filepath.Join(repo, "snapshots"), filepath.Join(repo, "refs")); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(snap); err == nil {
		return nil, errs.New(errs.Conflict, "hfcache", "%s is already there; nothing was written (move it away to write this revision again)", snap)
	}
	for _, r := range refNames { // before anything is written
		if cur, err := layout.ReadFile(filepath.Join(repo, "refs", r), maxRefFile); err == nil && strings.TrimSpace(string(cur)) != rev && !opts.Force {
			return nil, errs.New(errs.Conflict, "hfcache", "%s/refs/%s names revision %s; nothing was written (--force moves it to %s)", repo, r, strings.TrimSpace(string(cur)), rev)
		}
	}
	w := &layout.Written{Layout: "hf-cache", Path: snap, Root: dest, Name: id + "@" + rev}
	tmp := filepath.Join(repo, "snapshots", "."+rev+".tmp-"+hex.EncodeToString(m.Digest[:4]))
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("hfcache: %w", err)
	}
	defer os.RemoveAll(tmp) // only this call's temp folder; gone once renamed
	err = filepath.WalkDir(m.Dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(m.Dir, p)
		rel = filepath.ToSlash(rel)
		info, err := e.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("hfcache: %s is not a regular file", p)
		}
		h := GitBlob
		if IsLFS(rel, info.Size()) {
			h = SHA256
		}
		name, err := layout.HashFile(p, h)
		if err != nil {
			return err
		}
		wrote, err := layout.PutBlob(p, filepath.Join(repo, "blobs", name), h, name)
		if err != nil {
			return err
		}
		link := filepath.Join(tmp, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			return err
		}
		up := strings.Repeat("../", strings.Count(rel, "/")+2)
		if err := os.Symlink(up+"blobs/"+name, link); err != nil {
			return err
		}
		w.Files++
		w.Bytes += info.Size()
		if wrote {
			w.NewBlobs++
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hfcache: writing %s: %w", snap, err)
	}
	if err := syncTree(tmp); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, snap); err != nil {
		return nil, fmt.Errorf("hfcache: %w", err)
	}
	if err := layout.SyncDir(filepath.Dir(snap)); err != nil {
		return nil, err
	}
	for _, r := range refNames {
		if err := layout.WriteFile(filepath.Join(repo, "refs", filepath.FromSlash(r)), []byte(rev)); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// naming is the repo id, revision and refs a version is written as: what
// add recorded, else its ref's name, a revision made of its digest, main.
func naming(m layout.Model) (id, rev string, refNames []string, err error) {
	meta := m.Manifest.Meta
	id, rev = meta[MetaRepo], meta[MetaRevision]
	if id == "" {
		id = m.Name
	}
	if id == "" {
		return "", "", nil, errs.New(errs.SchemaError, "hfcache", "version %s has no Hugging Face repo id recorded; check it out by its ref name (ORG/NAME)", m.Digest.Short())
	}
	if rev == "" {
		rev = m.Digest.String()[:40]
		refNames = []string{"main"}
	} else if r := meta[MetaRefs]; r != "" {
		refNames = strings.Split(r, ",")
	}
	if !objects.IsCleanPath(id) || strings.Contains(id, "--") {
		return "", "", nil, errs.New(errs.SchemaError, "hfcache", "repo id %q cannot name a cache folder", id)
	}
	if !objects.IsCleanPath(rev) || strings.Contains(rev, "/") {
		return "", "", nil, errs.New(errs.SchemaError, "hfcache", "revision %q cannot name a snapshot folder", rev)
	}
	for _, r := range refNames {
		if !objects.IsCleanPath(r) {
			return "", "", nil, errs.New(errs.SchemaError, "hfcache", "ref %q cannot name a file under refs/", r)
		}
	}
	return id, rev, refNames, nil
}

// syncTree makes a new snapshot's folders durable (its links are entries
// of them).
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if err := layout.SyncDir(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	})
}
