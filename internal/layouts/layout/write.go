package layout

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	"github.com/mstore/mstore/internal/errs"
)

// WriteFile writes data to p atomically: a temp file beside it, fsync,
// rename, fsync of the directory.
func WriteFile(p string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("layout: %w", err)
	}
	tmp := p + ".tmp-" + randomSuffix()
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("layout: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("layout: %w", err)
	}
	return SyncDir(filepath.Dir(p))
}

// SyncDir makes a directory's entries durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("layout: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("layout: %w", err)
	}
	return nil
}

func randomSuffix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Hasher starts the hash a layout names a file of size bytes by (a git
// blob id hashes a header with the size first).
type Hasher func(size int64) hash.Hash

// PutBlob moves the restored file src to blob, the content-named file a
// layout keeps it as (want is the name's hash of its content, under h).
// A blob that is already there is kept when its content hashes to want
// (src is then left for the caller's cleanup), and refused as
// integrity_error when it does not: nothing is overwritten. It reports
// whether it wrote the blob.
func PutBlob(src, blob string, h Hasher, want string) (bool, error) {
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return false, fmt.Errorf("layout: %w", err)
	}
	if info, err := os.Lstat(blob); err == nil {
		if !info.Mode().IsRegular() {
			return false, errs.New(errs.PathTraversal, "layout", "%s is there and is not a regular file; move it away", blob)
		}
		got, err := HashFile(blob, h)
		if err != nil {
			return false, err
		}
		if got != want {
			return false, errs.New(errs.IntegrityError, "layout", "%s is there but its content hashes to %s; move it away and check out again", blob, got)
		}
		return false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("layout: %w", err)
	}
	f, err := os.Open(src)
	if err != nil {
		return false, fmt.Errorf("layout: %w", err)
	}
	err = f.Sync() // the restorer synced it; cheap when it did
	f.Close()
	if err != nil {
		return false, fmt.Errorf("layout: %w", err)
	}
	// Link, not rename: a blob that appeared meanwhile is never replaced.
	if err := os.Link(src, blob); err != nil {
		if errors.Is(err, os.ErrExist) {
			return PutBlob(src, blob, h, want)
		}
		return false, fmt.Errorf("layout: %w", err)
	}
	return true, SyncDir(filepath.Dir(blob))
}

// HashFile returns the hex digest of p's content under h.
func HashFile(p string, h Hasher) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", fmt.Errorf("layout: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("layout: %w", err)
	}
	w := h(info.Size())
	if _, err := io.Copy(w, f); err != nil {
		return "", fmt.Errorf("layout: %w", err)
	}
	return hex.EncodeToString(w.Sum(nil)), nil
}

// ReadFile reads p, refusing one longer than limit (size_limit_exceeded).
func ReadFile(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("layout: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("layout: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, errs.New(errs.SizeLimitExceeded, "layout", "%s is longer than %d bytes", p, limit)
	}
	return b, nil
}

// RealDirs refuses (path_traversal) any of dirs that exists as something
// other than a directory: a layout writes into its folders, never through
// a link put in their place.
func RealDirs(dirs ...string) error {
	for _, d := range dirs {
		info, err := os.Lstat(d)
		if err == nil && !info.IsDir() {
			return errs.New(errs.PathTraversal, "layout", "%s is there and is not a folder (a link is not followed); move it away", d)
		}
	}
	return nil
}
