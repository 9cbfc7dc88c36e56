package store

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/journal"
	"github.com/mstore/mstore/internal/objects"
)

// PutManifest records manifest d, whose canonical bytes are encoded. The
// blobs it needs, and the manifest itself as blob d (the copy that
// `fsck --rebuild-index` reads), must be recorded in the same transaction
// or before. When blob d is recorded, the index keeps a stub (its size and
// logical bytes) and the blob is where its bytes are read (in a store of
// format 2 on: keepsStubs): a manifest of
// 19,500 tensors is 5.8 MB, of 100,000 tensors 28 MB, and writing them
// into the index a second time was most of an add's last commit (30 of 35
// ms for the first, 40 of 41 for the second), and made a store of hundreds
// of such versions an index of gigabytes. Without blob d (a store written
// before stubs, a caller that records the copy later) the bytes go into
// the index, as they always did; both read the same (ManifestBytes). The
// index keeps encoded itself until tx ends: the caller must not change it.
func PutManifest(tx *bolt.Tx, d objects.Digest, encoded []byte) error {
	return putManifest(tx, d, int64(len(encoded)), encoded, func() (int64, bool) { return objects.PeekLogicalBytes(encoded) })
}

// PutManifestOf is PutManifest for the caller that has m, the manifest
// encoded is (an add): its logical bytes are m's, where PutManifest reads
// them from the encoding (5 ms for 100,000 tensors, in the add's
// transaction).
func PutManifestOf(tx *bolt.Tx, d objects.Digest, encoded []byte, logicalBytes int64) error {
	return putManifest(tx, d, int64(len(encoded)), encoded, func() (int64, bool) { return logicalBytes, true })
}

// PutManifestStub is PutManifestOf for a caller that has dropped the
// manifest's bytes (size of them) once its blob was written: in a store
// that keeps stubs (KeepsStubs), with blob d recorded, the index needs
// only the stub. (An add of 100,000 tensors held the 28 MB of bytes through
// all of its record batches for that.) Anywhere else it fails.
func PutManifestStub(tx *bolt.Tx, d objects.Digest, size, logicalBytes int64) error {
	return putManifest(tx, d, size, nil, func() (int64, bool) { return logicalBytes, true })
}

// putManifest records manifest d of size bytes: a stub when its blob is
// recorded and the store keeps stubs, else encoded (which must then be
// the bytes).
func putManifest(tx *bolt.Tx, d objects.Digest, size int64, encoded []byte, logicalBytes func() (int64, bool)) error {
	b := tx.Bucket(bucketManifests)
	if b.Get(d[:]) != nil {
		return nil
	}
	v := encoded
	if rec, ok, err := Blob(tx, d); err != nil {
		return err
	} else if ok && rec.Size == size && keepsStubs(tx) {
		if logical, ok := logicalBytes(); ok {
			v = manifestStub(rec.Size, logical)
		}
	}
	if v == nil { // PutManifestStub where no stub can be
		return errs.New(errs.IntegrityError, "store", "manifest %s: its %d bytes are needed (its blob is not recorded at that size, or the store keeps no stubs)", d.Short(), size)
	}
	if err := b.Put(d[:], v); err != nil {
		return fmt.Errorf("store: record manifest: %w", err)
	}
	return journal.Add(tx, journal.Record{Op: journal.OpManifest, Digest: d, Size: size})
}

// KeepsStubs reports whether the store keeps its manifests as stubs in
// its index (keepsStubs): a manifest's bytes are then needed only until
// its blob is written (PutManifestStub).
func (s *Store) KeepsStubs() (bool, error) {
	keeps := false
	err := s.View(func(tx *bolt.Tx) error { keeps = keepsStubs(tx); return nil })
	return keeps, err
}

// keepsStubs reports whether tx's store keeps its manifests as stubs:
// format 2 on. A format-1 store keeps every manifest's bytes in its index,
// as the builds that read it expect.
func keepsStubs(tx *bolt.Tx) bool {
	return getU64(tx.Bucket(bucketMeta).Get(keyFormat)) >= 2
}

// A manifest's stub is stubTag, its size and its logical bytes (8 bytes
// each, big-endian). A manifest's canonical bytes start with '{', never
// with stubTag.
const (
	stubTag = 0x01
	stubLen = 1 + 8 + 8
)

func manifestStub(size, logical int64) []byte {
	v := append(make([]byte, 0, stubLen), stubTag)
	v = binary.BigEndian.AppendUint64(v, uint64(size))
	return binary.BigEndian.AppendUint64(v, uint64(logical))
}

// stub reads v as a stub: ok false for a manifest's bytes.
func stub(v []byte) (size, logical int64, ok bool) {
	if len(v) != stubLen || v[0] != stubTag {
		return 0, 0, false
	}
	return int64(getU64(v[1:9])), int64(getU64(v[9:17])), true
}

// Manifest reads and decodes the manifest d, checking its digest.
func (s *Store) Manifest(tx *bolt.Tx, d objects.Digest) (*objects.Manifest, error) {
	var m *objects.Manifest
	err := s.withManifest(tx, d, func(b []byte) (err error) {
		// The decoded manifest copies what it keeps
		// (TestManifestOutlivesItsTransaction): b may be a mapping.
		m, err = objects.DecodeManifest(b)
		return err
	})
	if errors.Is(err, errNoManifest) {
		return nil, errs.New(errs.NotFound, "store", "no manifest %s in this store", d.Short())
	}
	return m, err
}

// ManifestBytes returns the encoded manifest d, checked against its
// digest, or nil if there is none. The bytes are the caller's.
func (s *Store) ManifestBytes(tx *bolt.Tx, d objects.Digest) ([]byte, error) {
	var out []byte
	err := s.withManifest(tx, d, func(b []byte) error {
		out = bytes.Clone(b)
		return nil
	})
	if errors.Is(err, errNoManifest) {
		return nil, nil
	}
	return out, err
}

var errNoManifest = errors.New("store: no such manifest")

// withManifest calls fn with the checked bytes of manifest d, valid until
// fn returns: the index's, or blob d's for a stub.
func (s *Store) withManifest(tx *bolt.Tx, d objects.Digest, fn func([]byte) error) error {
	v := tx.Bucket(bucketManifests).Get(d[:])
	if v == nil {
		return errNoManifest
	}
	size, _, ok := stub(v)
	if !ok {
		if err := objects.Verify(v, d, "manifest "+d.Short()); err != nil {
			return err
		}
		return fn(v)
	}
	rec, ok, err := Blob(tx, d)
	if err != nil {
		return err
	}
	if !ok || rec.Size != size {
		return errs.New(errs.IntegrityError, "store", "manifest %s: its blob is not recorded as its %d bytes (run `mstore fsck`)", d.Short(), size)
	}
	if err := s.withBlob(rec, fn); err != nil {
		return errs.Wrap(errs.IntegrityError, "store", err, "manifest %s", d.Short())
	}
	return nil
}

// withBlob calls fn with blob rec's bytes, checked against its digest. A
// loose raw blob is mapped, not read: a manifest of 100,000 tensors (28
// MB) is decoded from the page cache, as it was from the index's mapping,
// and leaves no copy on the heap for a checkout to carry while it plans.
func (s *Store) withBlob(rec BlobRecord, fn func([]byte) error) (err error) {
	if rec.Encoding != EncodingRaw || rec.Coded() || rec.Size == 0 {
		return s.readBlob(rec, fn)
	}
	f, err := os.Open(s.BlobPath(rec.Digest))
	if err != nil {
		return errs.Wrap(errs.IntegrityError, "store", err, "blob %s (run `mstore fsck`)", rec.Digest.Short())
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || info.Size() != rec.Size {
		return errs.New(errs.IntegrityError, "store", "blob %s: its file is not its %d recorded bytes (run `mstore fsck`)", rec.Digest.Short(), rec.Size)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(rec.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil { // no address space left (ulimit -v): read it instead
		return s.readBlob(rec, fn)
	}
	defer unix.Munmap(m)
	// A read error of the device faults in the mapping: it is the blob's.
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if p := recover(); p != nil {
			err = errs.New(errs.IntegrityError, "store", "blob %s: reading it failed: %v (run `mstore fsck`)", rec.Digest.Short(), p)
		}
	}()
	if err := objects.Verify(m, rec.Digest, "blob "+rec.Digest.Short()); err != nil {
		return err
	}
	return fn(m)
}

// readBlob calls fn with blob rec's bytes, read onto the heap and checked
// (BlobReader.Read).
func (s *Store) readBlob(rec BlobRecord, fn func([]byte) error) error {
	r := s.NewBlobReader()
	defer r.Close()
	b, err := r.Read(rec, nil)
	if err != nil {
		return err
	}
	return fn(b)
}

// ManifestSize is the length of manifest d's encoding, if it is recorded.
func ManifestSize(tx *bolt.Tx, d objects.Digest) (int64, bool) {
	v := tx.Bucket(bucketManifests).Get(d[:])
	if v == nil {
		return 0, false
	}
	if size, _, ok := stub(v); ok {
		return size, true
	}
	return int64(len(v)), true
}

// CollectBeforeManifest runs a garbage collection before a command that
// decodes one manifest after another (fsck, gc's marks) decodes one of
// size bytes, when it is large (1 MiB or more; 28 MB for 100,000
// tensors): the last one's decoding is garbage by then, and collected the
// heap stays near one manifest and what the command keeps, where the
// collector waited for twice that (fsck of 7 versions of 100,000 tensors:
// 134 MB of heap for 67 live, with it 67 for 44; gc --dry-run of them
// peaked at 134-162 MiB without, 102-112 MiB with). A collection costs a
// few milliseconds of such a decoding.
func CollectBeforeManifest(size int64) {
	if size >= 1<<20 {
		runtime.GC()
	}
}

// ManifestLogicalBytes is the size of manifest d's files, without
// reading the manifest: from its stub, or peeked from the head of the
// bytes an older store keeps in the index (objects.PeekLogicalBytes). It
// checks nothing (fsck does); ok false when neither says, and the caller
// decodes the manifest.
func ManifestLogicalBytes(tx *bolt.Tx, d objects.Digest) (int64, bool) {
	v := tx.Bucket(bucketManifests).Get(d[:])
	if _, logical, ok := stub(v); ok {
		return logical, true
	}
	return objects.PeekLogicalBytes(v)
}

// ManifestIndex answers digest questions about the manifests in one
// transaction; refs.Resolve uses it.
type ManifestIndex struct{ Tx *bolt.Tx }

// HasManifest reports whether the manifest d is recorded.
func (m ManifestIndex) HasManifest(d objects.Digest) bool {
	return m.Tx.Bucket(bucketManifests).Get(d[:]) != nil
}

// ManifestsWithPrefix lists the manifests whose hex digest starts with prefix.
func (m ManifestIndex) ManifestsWithPrefix(prefix string) []objects.Digest {
	// Seek to the bytes of the even-length part of the prefix, then filter.
	even := prefix[:len(prefix)/2*2]
	seek, err := hex.DecodeString(even)
	if err != nil {
		return nil
	}
	var out []objects.Digest
	c := m.Tx.Bucket(bucketManifests).Cursor()
	for k, _ := c.Seek(seek); k != nil && bytes.HasPrefix(k, seek); k, _ = c.Next() {
		var d objects.Digest
		copy(d[:], k)
		if len(d.String()) >= len(prefix) && d.String()[:len(prefix)] == prefix {
			out = append(out, d)
		}
	}
	return out
}

// ForEachManifest calls fn with every manifest digest.
func ForEachManifest(tx *bolt.Tx, fn func(objects.Digest) error) error {
	return tx.Bucket(bucketManifests).ForEach(func(k, _ []byte) error {
		var d objects.Digest
		copy(d[:], k)
		return fn(d)
	})
}

// RemoveManifest deletes the manifest d (gc's sweep). It does not look at
// refs: gc checks, in the same transaction, that nothing names d.
func RemoveManifest(tx *bolt.Tx, d objects.Digest) error {
	if err := tx.Bucket(bucketManifests).Delete(d[:]); err != nil {
		return fmt.Errorf("store: remove manifest: %w", err)
	}
	return nil
}

// Version is a stored version as a reader of its blobs needs it: the
// manifest, its encoding (when asked for), and the record of every blob it
// names.
type Version struct {
	Manifest *objects.Manifest
	Encoded  []byte
	Records  map[objects.Digest]BlobRecord
}

// ReadVersion takes the store lock shared, so that gc waits while the
// caller reads the version's blobs, and reads version d in one
// transaction. The caller releases the lock (Unlock) once its blobs are
// read; on an error nothing is held. Encoded is nil unless withEncoded: a
// caller that needs the manifest's bytes only at its end (an OCI layout's
// map layer) reads them then (ManifestBytes) rather than carry them, 28 MB
// for 100,000 tensors, while it writes the files.
func (s *Store) ReadVersion(d objects.Digest, withEncoded bool) (*Version, *Lock, error) {
	lock, err := s.Lock(LockShared, 0)
	if err != nil {
		return nil, nil, err
	}
	v := &Version{}
	err = s.View(func(tx *bolt.Tx) (err error) {
		err = s.withManifest(tx, d, func(b []byte) (err error) {
			if withEncoded {
				v.Encoded = bytes.Clone(b)
			}
			v.Manifest, err = objects.DecodeManifest(b)
			return err
		})
		if errors.Is(err, errNoManifest) {
			return errs.New(errs.NotFound, "store", "no manifest %s in this store", d.Short())
		}
		if err != nil {
			return err
		}
		v.Records, err = LookupRecords(tx, v.Manifest.Blobs())
		return err
	})
	if err != nil {
		lock.Unlock()
		return nil, nil, err
	}
	return v, lock, nil
}

// WriteManifestBlob makes the blob copy of manifest d durable (the copy
// `fsck --rebuild-index` reads back) unless the store records it already,
// and returns the records to commit with the manifest, in the same
// transaction as PutManifest. Every writer of a manifest that does not
// already stage it with its other blobs (as add does) calls this first.
func (s *Store) WriteManifestBlob(d objects.Digest, encoded []byte) ([]BlobRecord, error) {
	var have bool
	if err := s.View(func(tx *bolt.Tx) error {
		var err error
		_, have, err = Blob(tx, d)
		return err
	}); err != nil || have {
		return nil, err
	}
	w := s.NewBlobWriter(nil)
	defer w.Abort()
	if _, err := w.Put(d, encoded); err != nil {
		return nil, err
	}
	return w.Commit()
}
