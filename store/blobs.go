package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/objects"
)

// Encoding says how a blob's bytes are kept on disk. Digests always name
// the raw bytes, so a new encoding never changes a digest or a manifest.
type Encoding byte

const (
	_ Encoding = iota
	// EncodingRaw is the bytes as they are, one file per blob.
	EncodingRaw
)

// BlobRecord is what the index knows of a blob.
type BlobRecord struct {
	Digest   objects.Digest
	Size     int64
	Encoding Encoding
}

func encodeBlobRecord(r BlobRecord) []byte {
	b := []byte{byte(r.Encoding)}
	return append(b, u64(uint64(r.Size))...)
}

func decodeBlobRecord(d objects.Digest, b []byte) (BlobRecord, error) {
	if len(b) != 9 || Encoding(b[0]) != EncodingRaw {
		return BlobRecord{}, errs.New(errs.IntegrityError, "store", "blob %s: unreadable index record", d.Short())
	}
	return BlobRecord{Digest: d, Encoding: Encoding(b[0]), Size: int64(getU64(b[1:]))}, nil
}

// BlobPath is the file that holds a raw blob.
func (s *Store) BlobPath(d objects.Digest) string {
	h := d.String()
	return filepath.Join(s.dir, objectsDir, h[:2], h)
}

// HasBlobFile reports whether a blob's file exists under its final name. Such
// a file always holds durable bytes (see the package comment).
func (s *Store) HasBlobFile(d objects.Digest) bool {
	_, err := os.Stat(s.BlobPath(d))
	return err == nil
}

// ReadBlob reads blob d into buf (grown as needed) and checks its digest:
// a mismatch or a missing file is an integrity_error.
func (s *Store) ReadBlob(d objects.Digest, size int64, buf []byte) ([]byte, error) {
	f, err := os.Open(s.BlobPath(d))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errs.New(errs.IntegrityError, "store", "blob %s is missing from the store (run `mstore fsck`)", d.Short())
		}
		return nil, fmt.Errorf("store: %w", err)
	}
	defer f.Close()
	if int64(cap(buf)) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, errs.Wrap(errs.IntegrityError, "store", err, "blob %s is shorter than %d bytes", d.Short(), size)
	}
	if n, _ := f.Read(make([]byte, 1)); n != 0 {
		return nil, errs.New(errs.IntegrityError, "store", "blob %s is longer than %d bytes", d.Short(), size)
	}
	if err := objects.Verify(buf, d, "blob "+d.Short()); err != nil {
		return nil, err
	}
	return buf, nil
}

// BlobWriter writes a batch of new blobs. Put may be called from many
// goroutines; Commit makes every blob durable under its final name; Abort
// removes what Commit did not.
type BlobWriter struct {
	s       *Store
	mu      sync.Mutex
	pending map[objects.Digest]string // digest → temp path
	written []BlobRecord
}

// NewBlobWriter starts a batch.
func (s *Store) NewBlobWriter() *BlobWriter {
	return &BlobWriter{s: s, pending: map[objects.Digest]string{}}
}

// Put stores data as blob d unless the store or the batch already has it.
// It reports whether it wrote the blob. The caller has computed d from data.
func (w *BlobWriter) Put(d objects.Digest, data []byte) (bool, error) {
	w.mu.Lock()
	_, dup := w.pending[d]
	if !dup {
		w.pending[d] = "" // claimed; the path follows
	}
	w.mu.Unlock()
	if dup || w.s.HasBlobFile(d) {
		if !dup {
			w.mu.Lock()
			delete(w.pending, d)
			w.mu.Unlock()
		}
		return false, nil
	}
	tmp, err := w.s.writeTemp(d.String(), data)
	if err != nil {
		w.mu.Lock()
		delete(w.pending, d)
		w.mu.Unlock()
		return false, err
	}
	w.mu.Lock()
	w.pending[d] = tmp
	w.written = append(w.written, BlobRecord{Digest: d, Size: int64(len(data)), Encoding: EncodingRaw})
	w.mu.Unlock()
	return true, nil
}

// Commit makes the batch durable: one sync of the filesystem for the temp
// files' bytes, the renames, one more for the directory entries.
func (w *BlobWriter) Commit() ([]BlobRecord, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.written) == 0 {
		return nil, nil
	}
	if err := w.s.syncAll(); err != nil {
		return nil, err
	}
	dirs := map[string]bool{}
	for _, r := range w.written {
		final := w.s.BlobPath(r.Digest)
		dir := filepath.Dir(final)
		if !dirs[dir] {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, fmt.Errorf("store: %w", err)
			}
			dirs[dir] = true
		}
		if err := os.Rename(w.pending[r.Digest], final); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		delete(w.pending, r.Digest)
	}
	if err := w.s.syncAll(); err != nil {
		return nil, err
	}
	out := w.written
	w.written = nil
	return out, nil
}

// Abort removes the temp files of blobs not yet committed.
func (w *BlobWriter) Abort() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for d, p := range w.pending {
		if p != "" {
			os.Remove(p)
		}
		delete(w.pending, d)
	}
	w.written = nil
}

// writeTemp writes data to a new file in tmp/ whose name starts with name.
func (s *Store) writeTemp(name string, data []byte) (string, error) {
	var rnd [6]byte
	rand.Read(rnd[:])
	p := filepath.Join(s.dir, tmpDir, name+"."+hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return "", fmt.Errorf("store: %w", err)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(p)
		return "", fmt.Errorf("store: write blob: %w", err)
	}
	return p, nil
}

// syncAll flushes every dirty page and inode of the store's filesystem.
func (s *Store) syncAll() error {
	f, err := os.Open(s.dir)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("store: syncfs: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("store: sync %s: %w", dir, err)
	}
	return nil
}

// RecordBlobs adds records for blobs whose files are durable. Records that
// exist are left as they are.
func RecordBlobs(tx *bolt.Tx, recs []BlobRecord) error {
	b := tx.Bucket(bucketBlobs)
	for _, r := range recs {
		if b.Get(r.Digest[:]) != nil {
			continue
		}
		if err := b.Put(r.Digest[:], encodeBlobRecord(r)); err != nil {
			return fmt.Errorf("store: record blob: %w", err)
		}
	}
	return nil
}

// Blob returns the index record of blob d.
func Blob(tx *bolt.Tx, d objects.Digest) (BlobRecord, bool, error) {
	v := tx.Bucket(bucketBlobs).Get(d[:])
	if v == nil {
		return BlobRecord{}, false, nil
	}
	r, err := decodeBlobRecord(d, v)
	return r, err == nil, err
}

// ForEachBlob calls fn for every recorded blob.
func ForEachBlob(tx *bolt.Tx, fn func(BlobRecord) error) error {
	return tx.Bucket(bucketBlobs).ForEach(func(k, v []byte) error {
		var d objects.Digest
		copy(d[:], k)
		r, err := decodeBlobRecord(d, v)
		if err != nil {
			return err
		}
		return fn(r)
	})
}
