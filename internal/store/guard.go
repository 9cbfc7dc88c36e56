package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime/debug"
	"syscall"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
)

// A damaged index.db must never crash a command. bbolt reads the file
// through mmap: a page past the end of a truncated file is a SIGBUS, and a
// zeroed or flipped page makes it panic. So before bbolt opens the file,
// checkIndexFile reads its two meta pages itself and checks that the file
// holds every page they count; and every transaction runs under guarded,
// which turns a fault on the mapping into a panic (debug.SetPanicOnFault)
// and a panic into an integrity_error that says what to do.

// bbolt's on-disk constants (go.etcd.io/bbolt/internal/common).
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	boltPageHeader = 16
	boltMetaLen    = 64 // magic, version, page size, flags, root (16), freelist, pgid, txid, checksum
	boltNoFreelist = ^uint64(0)
	// boltFreelistPage is the flags of a free list page.
	boltFreelistPage = 0x10
)

// boltMeta is the part of a meta page checkIndexFile needs.
type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

// readBoltMeta decodes the meta page at off, or reports why it is not one.
func readBoltMeta(f *os.File, off int64) (boltMeta, error) {
	var b [boltPageHeader + boltMetaLen]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		if errors.Is(err, io.EOF) {
			return boltMeta{}, fmt.Errorf("the file ends before its meta page at byte %d", off)
		}
		return boltMeta{}, err
	}
	m := b[boltPageHeader:]
	le := binary.NativeEndian // bbolt writes its structs in the machine's byte order
	if le.Uint32(m[0:]) != boltMagic {
		return boltMeta{}, fmt.Errorf("no bbolt meta page at byte %d", off)
	}
	if v := le.Uint32(m[4:]); v != boltVersion {
		return boltMeta{}, fmt.Errorf("meta page at byte %d: bbolt version %d", off, v)
	}
	h := fnv.New64a()
	h.Write(m[:56])
	if h.Sum64() != le.Uint64(m[56:]) {
		return boltMeta{}, fmt.Errorf("meta page at byte %d fails its checksum", off)
	}
	return boltMeta{pageSize: le.Uint32(m[8:]), root: le.Uint64(m[16:]), freelist: le.Uint64(m[32:]),
		pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, nil
}

// checkIndexFile checks, without mapping it, that path's meta pages are
// sound and that the file is as long as they say, so that bbolt never maps
// pages a truncated file lacks.
func checkIndexFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	m0, err0 := readBoltMeta(f, 0)
	var m1 boltMeta
	var err1 error
	switch {
	case err0 == nil:
		m1, err1 = readBoltMeta(f, int64(m0.pageSize))
	default:
		err1 = err0
		for ps := int64(1024); ps <= 64<<10 && ps < info.Size(); ps *= 2 {
			if m1, err1 = readBoltMeta(f, ps); err1 == nil {
				break
			}
		}
	}
	m := m0
	switch {
	case err0 != nil && err1 != nil:
		return indexDamaged(fmt.Sprintf("%v, and %v", err0, err1))
	case err0 != nil || err1 == nil && m1.txid > m0.txid:
		m = m1
	}
	ps := uint64(m.pageSize)
	if ps < 512 || ps > 1<<20 || ps&(ps-1) != 0 {
		return indexDamaged(fmt.Sprintf("page size %d", ps))
	}
	if m.pgid < 2 || m.root >= m.pgid || m.freelist >= m.pgid && m.freelist != boltNoFreelist {
		return indexDamaged(fmt.Sprintf("its meta page says %d pages, root at %d, free list at %d", m.pgid, m.root, m.freelist))
	}
	if need := m.pgid * ps; uint64(info.Size()) < need {
		return indexDamaged(fmt.Sprintf("it is %d bytes long, its meta page counts %d pages of %d bytes (%d bytes): the file is truncated", info.Size(), m.pgid, ps, need))
	}
	if m.freelist != boltNoFreelist {
		// bbolt panics on a bad free list inside Open, where its mapping
		// (and the flock the mapping holds) can never be released.
		var h [boltPageHeader]byte
		if _, err := f.ReadAt(h[:], int64(m.freelist*ps)); err != nil {
			return indexDamaged(fmt.Sprintf("its free list page %d cannot be read: %v", m.freelist, err))
		}
		le := binary.NativeEndian
		id, flags, overflow := le.Uint64(h[0:]), le.Uint16(h[8:]), uint64(le.Uint32(h[12:]))
		if id != m.freelist || flags != boltFreelistPage || m.freelist+overflow >= m.pgid {
			return indexDamaged(fmt.Sprintf("its free list page %d is not one (id %d, flags %#x, %d overflow pages)", m.freelist, id, flags, overflow))
		}
	}
	return nil
}

// indexDamaged is the error of every command that finds index.db damaged.
func indexDamaged(what string) error {
	return errs.New(errs.IntegrityError, "store", "index.db is damaged (%s); nothing was changed. "+
		"Run `mstore fsck --rebuild-index` to rebuild it from the blob files and the journal (the damaged file is kept beside it)", what)
}

// guarded runs fn with faults on mapped memory turned into panics, and
// panics turned into indexDamaged: fn reads bbolt's mapping of index.db.
func guarded(fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if p := recover(); p != nil {
			err = indexDamaged(fmt.Sprintf("reading it failed: %v", p))
		}
	}()
	return fn()
}

// openBolt opens an index file whose meta pages checkIndexFile approved;
// bbolt's own refusals of a damaged file are integrity errors too.
func openBolt(path string, opts *bolt.Options) (db *bolt.DB, err error) {
	if err := checkIndexFile(path); err != nil {
		return nil, err
	}
	// bbolt does not close its file when it panics inside Open: close it
	// here. (Its mapping, if it made one, stays, and with it the flock:
	// checkIndexFile checks what bbolt's Open panics on, so that this does
	// not happen.)
	var file *os.File
	o := *opts
	o.OpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm)
		file = f
		return f, err
	}
	err = guarded(func() error {
		db, err = bolt.Open(path, 0o644, &o)
		return err
	})
	if db == nil && file != nil {
		file.Close()
	}
	if errors.Is(err, bolt.ErrInvalid) || errors.Is(err, bolt.ErrChecksum) || errors.Is(err, bolt.ErrVersionMismatch) {
		return nil, indexDamaged(err.Error())
	}
	return db, err
}

// checkedView runs fn in a read transaction of an index opened for writing
// (bbolt then loads its free list here, under guarded) after reading every
// page of it in this goroutine: tx.Check reads pages in a goroutine of its
// own, where a panic would crash the program, so it must only see pages
// already read without one. (Read, not kept mapped: the pages read are
// released as the read goes, releaseAt, and stay in the page cache, from
// which Check maps them again. A fault there is what a file cut short
// gives, and the read here has found the file whole under the store's
// lock. Kept mapped, they were the whole index in fsck's peak RSS: 200 of
// 222 MB for a store of 1.6 million blobs.)
//
// A store this process may not write is opened read-only: fn is then told
// (canCheck false) not to run tx.Check, whose free-list load could panic
// where no recover can catch it.
func (s *Store) checkedView(fn func(tx *bolt.Tx, canCheck bool) error) error {
	canCheck := true
	db, err := s.open(false)
	if errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
		canCheck = false
		db, err = s.open(true)
	}
	if err != nil {
		return err
	}
	defer db.Close()
	return guarded(func() error {
		return db.View(func(tx *bolt.Tx) error {
			read := 0
			if err := tx.ForEach(func(_ []byte, b *bolt.Bucket) error { return readAll(tx, b, &read) }); err != nil {
				return err
			}
			return fn(tx, canCheck)
		})
	})
}

// readAll reads every key and value of b and of the buckets inside it,
// counting them in *read and releasing the pages read (releaseAt).
func readAll(tx *bolt.Tx, b *bolt.Bucket, read *int) error {
	var sum byte
	err := b.ForEach(func(k, v []byte) error {
		*read++
		releaseAt(tx, *read)
		if v == nil {
			if nb := b.Bucket(k); nb != nil {
				return readAll(tx, nb, read)
			}
		}
		for _, c := range k {
			sum ^= c
		}
		for _, c := range v {
			sum ^= c
		}
		return nil
	})
	_ = sum
	return err
}
