package store

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
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
	// EncodingRaw is one file per blob, objects/ab/<digest>.
	EncodingRaw
	// EncodingPacked is a run of a pack file, objects/packs/<id>.pack:
	// small blobs share packs so that a model of many small tensors costs a
	// few files, not one per tensor.
	EncodingPacked
)

// PackThreshold is the size below which a blob goes into a pack file.
const PackThreshold = 1 << 20

// packTarget is the size at which a pack file is closed and another begun.
const packTarget = 64 << 20

// PackID names a pack file.
type PackID [16]byte

func (p PackID) String() string { return hex.EncodeToString(p[:]) }

// BlobRecord is what the index knows of a blob.
type BlobRecord struct {
	Digest   objects.Digest
	Size     int64
	Encoding Encoding
	Pack     PackID // for EncodingPacked
	Offset   int64  // in the pack, for EncodingPacked
}

// Record layout: encoding(1) size(8) [pack(16) offset(8)].
func encodeBlobRecord(r BlobRecord) []byte {
	b := append([]byte{byte(r.Encoding)}, u64(uint64(r.Size))...)
	if r.Encoding == EncodingPacked {
		b = append(b, r.Pack[:]...)
		b = append(b, u64(uint64(r.Offset))...)
	}
	return b
}

func decodeBlobRecord(d objects.Digest, b []byte) (BlobRecord, error) {
	bad := errs.New(errs.IntegrityError, "store", "blob %s: unreadable index record", d.Short())
	if len(b) < 9 {
		return BlobRecord{}, bad
	}
	r := BlobRecord{Digest: d, Encoding: Encoding(b[0]), Size: int64(getU64(b[1:9]))}
	switch {
	case r.Encoding == EncodingRaw && len(b) == 9:
	case r.Encoding == EncodingPacked && len(b) == 9+16+8:
		copy(r.Pack[:], b[9:25])
		r.Offset = int64(getU64(b[25:]))
	default:
		return BlobRecord{}, bad
	}
	if r.Size < 0 || r.Offset < 0 {
		return BlobRecord{}, bad
	}
	return r, nil
}

// BlobPath is the file that holds a raw blob.
func (s *Store) BlobPath(d objects.Digest) string {
	h := d.String()
	return filepath.Join(s.dir, objectsDir, h[:2], h)
}

// PackPath is the file of a pack.
func (s *Store) PackPath(id PackID) string {
	return filepath.Join(s.dir, objectsDir, "packs", id.String()+".pack")
}

// BlobSet is a snapshot of the blobs a store has recorded.
type BlobSet struct{ sorted []objects.Digest }

// Has reports whether d was recorded when the snapshot was taken.
func (b *BlobSet) Has(d objects.Digest) bool {
	i := sort.Search(len(b.sorted), func(i int) bool { return bytes.Compare(b.sorted[i][:], d[:]) >= 0 })
	return i < len(b.sorted) && b.sorted[i] == d
}

// KnownBlobs takes a snapshot of every recorded blob digest (32 bytes each),
// so that an add can skip what the store has without holding the index
// open while it hashes.
func (s *Store) KnownBlobs() (*BlobSet, error) {
	set := &BlobSet{}
	err := s.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketBlobs).ForEach(func(k, _ []byte) error {
			set.sorted = append(set.sorted, objects.Digest(k))
			return nil
		})
	})
	return set, err // bbolt iterates in key order: sorted already
}

// BlobWriter writes a batch of new blobs. Put may be called from many
// goroutines; Commit makes every blob durable under its final name; Abort
// removes what Commit did not.
type BlobWriter struct {
	s     *Store
	known *BlobSet

	mu      sync.Mutex
	claimed map[objects.Digest]bool
	loose   []looseBlob
	pack    *openPack   // the pack small blobs are appended to
	packs   []*openPack // full packs, closed
	err     error       // a failed pack write poisons the batch
}

type looseBlob struct {
	rec BlobRecord
	tmp string
}

type openPack struct {
	id   PackID
	tmp  string
	f    *os.File
	size int64
	recs []BlobRecord
}

// NewBlobWriter starts a batch; blobs in known are not written again.
func (s *Store) NewBlobWriter(known *BlobSet) *BlobWriter {
	if known == nil {
		known = &BlobSet{}
	}
	return &BlobWriter{s: s, known: known, claimed: map[objects.Digest]bool{}}
}

// Put stores data as blob d unless the store or the batch already has it,
// and reports whether it wrote it. The caller has computed d from data.
func (w *BlobWriter) Put(d objects.Digest, data []byte) (bool, error) {
	w.mu.Lock()
	if w.err != nil {
		defer w.mu.Unlock()
		return false, w.err
	}
	if w.claimed[d] || w.known.Has(d) {
		w.mu.Unlock()
		return false, nil
	}
	w.claimed[d] = true
	if len(data) < PackThreshold {
		defer w.mu.Unlock()
		if err := w.appendToPack(d, data); err != nil {
			w.err = err
			return false, err
		}
		return true, nil
	}
	w.mu.Unlock()
	tmp, err := w.s.writeTemp(d.String(), data)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		delete(w.claimed, d)
		return false, err
	}
	w.loose = append(w.loose, looseBlob{rec: BlobRecord{Digest: d, Size: int64(len(data)), Encoding: EncodingRaw}, tmp: tmp})
	return true, nil
}

// appendToPack writes a small blob at the end of the open pack; w.mu is held.
func (w *BlobWriter) appendToPack(d objects.Digest, data []byte) error {
	if w.pack == nil {
		p := &openPack{}
		rand.Read(p.id[:])
		p.tmp = filepath.Join(w.s.dir, tmpDir, "pack-"+p.id.String())
		f, err := os.OpenFile(p.tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		p.f = f
		w.pack = p
	}
	p := w.pack
	if _, err := p.f.Write(data); err != nil {
		return fmt.Errorf("store: write pack: %w", err)
	}
	p.recs = append(p.recs, BlobRecord{Digest: d, Size: int64(len(data)), Encoding: EncodingPacked, Pack: p.id, Offset: p.size})
	p.size += int64(len(data))
	if p.size >= packTarget {
		return w.closePack()
	}
	return nil
}

func (w *BlobWriter) closePack() error {
	if w.pack == nil {
		return nil
	}
	p := w.pack
	w.pack = nil
	w.packs = append(w.packs, p)
	if err := p.f.Close(); err != nil {
		return fmt.Errorf("store: close pack: %w", err)
	}
	p.f = nil
	return nil
}

// Commit makes the batch durable: one sync of the filesystem for the temp
// files' bytes, the renames, one more for the directory entries. It returns
// the records to put in the index.
func (w *BlobWriter) Commit() ([]BlobRecord, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return nil, w.err
	}
	if err := w.closePack(); err != nil {
		return nil, err
	}
	if len(w.loose) == 0 && len(w.packs) == 0 {
		return nil, nil
	}
	if err := w.s.syncAll(); err != nil {
		return nil, err
	}
	var out []BlobRecord
	made := map[string]bool{}
	publish := func(tmp, final string) error {
		if dir := filepath.Dir(final); !made[dir] {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("store: %w", err)
			}
			made[dir] = true
		}
		if err := os.Rename(tmp, final); err != nil {
			return fmt.Errorf("store: %w", err)
		}
		return nil
	}
	for _, b := range w.loose {
		if err := publish(b.tmp, w.s.BlobPath(b.rec.Digest)); err != nil {
			return nil, err
		}
		out = append(out, b.rec)
	}
	w.loose = nil
	for _, p := range w.packs {
		if err := publish(p.tmp, w.s.PackPath(p.id)); err != nil {
			return nil, err
		}
		out = append(out, p.recs...)
	}
	w.packs = nil
	if err := w.s.syncAll(); err != nil {
		return nil, err
	}
	return out, nil
}

// Abort removes the temp files of blobs not yet committed.
func (w *BlobWriter) Abort() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closePack()
	for _, b := range w.loose {
		os.Remove(b.tmp)
	}
	for _, p := range w.packs {
		os.Remove(p.tmp)
	}
	w.loose, w.packs = nil, nil
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

// BlobReader reads blobs, keeping pack files open between reads. It is safe
// for concurrent use.
type BlobReader struct {
	s     *Store
	mu    sync.Mutex
	packs map[PackID]*os.File
}

// NewBlobReader returns a reader; Close it when done.
func (s *Store) NewBlobReader() *BlobReader {
	return &BlobReader{s: s, packs: map[PackID]*os.File{}}
}

// Read reads the blob rec names into buf (grown as needed) and checks its
// digest: a mismatch, a short read or a missing file is an integrity_error.
func (r *BlobReader) Read(rec BlobRecord, buf []byte) ([]byte, error) {
	if int64(cap(buf)) < rec.Size {
		buf = make([]byte, rec.Size)
	}
	buf = buf[:rec.Size]
	missing := func(err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return errs.New(errs.IntegrityError, "store", "blob %s is missing from the store (run `mstore fsck`)", rec.Digest.Short())
		}
		return errs.Wrap(errs.IntegrityError, "store", err, "blob %s: unreadable", rec.Digest.Short())
	}
	switch rec.Encoding {
	case EncodingRaw:
		f, err := os.Open(r.s.BlobPath(rec.Digest))
		if err != nil {
			return nil, missing(err)
		}
		defer f.Close()
		if _, err := io.ReadFull(f, buf); err != nil {
			return nil, missing(err)
		}
		if n, _ := f.Read(make([]byte, 1)); n != 0 {
			return nil, errs.New(errs.IntegrityError, "store", "blob %s is longer than %d bytes", rec.Digest.Short(), rec.Size)
		}
	case EncodingPacked:
		f, err := r.pack(rec.Pack)
		if err != nil {
			return nil, missing(err)
		}
		if _, err := f.ReadAt(buf, rec.Offset); err != nil {
			return nil, missing(err)
		}
	default:
		return nil, errs.New(errs.IntegrityError, "store", "blob %s: unknown encoding %d", rec.Digest.Short(), rec.Encoding)
	}
	if err := objects.Verify(buf, rec.Digest, "blob "+rec.Digest.Short()); err != nil {
		return nil, err
	}
	return buf, nil
}

func (r *BlobReader) pack(id PackID) (*os.File, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.packs[id]; ok {
		return f, nil
	}
	f, err := os.Open(r.s.PackPath(id))
	if err != nil {
		return nil, err
	}
	r.packs[id] = f
	return f, nil
}

// Close closes the pack files the reader opened.
func (r *BlobReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, f := range r.packs {
		f.Close()
		delete(r.packs, id)
	}
	return nil
}

// RecordBlobs adds records for blobs whose files are durable. A blob already
// recorded keeps its record (its bytes are the same).
func RecordBlobs(tx *bolt.Tx, recs []BlobRecord) error {
	// bbolt inserts into a node by shifting it until the commit splits it:
	// keys in order append, random keys make a large batch quadratic.
	recs = slices.Clone(recs)
	slices.SortFunc(recs, func(a, b BlobRecord) int { return bytes.Compare(a.Digest[:], b.Digest[:]) })
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

// Records returns the index records of the blobs ds; a blob the index does
// not know is an integrity_error (a manifest needs it).
func Records(tx *bolt.Tx, ds []objects.Digest) (map[objects.Digest]BlobRecord, error) {
	out := make(map[objects.Digest]BlobRecord, len(ds))
	for _, d := range ds {
		r, ok, err := Blob(tx, d)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errs.New(errs.IntegrityError, "store", "blob %s is not in the index (run `mstore fsck`)", d.Short())
		}
		out[d] = r
	}
	return out, nil
}

// ForEachBlob calls fn for every recorded blob.
func ForEachBlob(tx *bolt.Tx, fn func(BlobRecord) error) error {
	return tx.Bucket(bucketBlobs).ForEach(func(k, v []byte) error {
		r, err := decodeBlobRecord(objects.Digest(k), v)
		if err != nil {
			return err
		}
		return fn(r)
	})
}
