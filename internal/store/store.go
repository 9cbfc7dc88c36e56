package store

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/journal"
	"github.com/mstore/mstore/internal/objects"
)

// FormatVersion is the store layout this build creates. Format 2 keeps a
// manifest's bytes only in its blob, and a stub in the index
// (PutManifest); a build of format 1 would take the stubs for unreadable
// manifests, so it refuses the store instead.
const FormatVersion = 2

// oldestFormat is the oldest layout this build reads and writes, in its
// own form: a format-1 store stays readable by the builds that made it.
const oldestFormat = 1

// keyFormat is the meta key of the store's layout version.
var keyFormat = []byte("format")

const (
	indexFile   = "index.db"
	journalFile = "journal"
	objectsDir  = "objects"
	tmpDir      = "tmp"
)

var (
	bucketMeta      = []byte("meta")
	bucketBlobs     = []byte("blobs")
	bucketManifests = []byte("manifests")
	// bucketSuspect holds the blobs fsck found missing or corrupt, so that
	// the next add of their source rewrites them (see RecordBlobs).
	bucketSuspect = []byte("suspect")

	keyJournalSeq = []byte("journal_seq") // in bucketMeta: the last batch committed
)

// Options tune how a store is opened.
type Options struct {
	// LockTimeout bounds how long a command waits for another one's lock on
	// the index. Zero means the default, 30 s (never forever).
	LockTimeout time.Duration
	// FS is the file system the write path uses; nil means the real one.
	// Tests inject faults with it.
	FS FS
	// Names is the layer of names RebuildIndex replays the journal's ref
	// records into (package names gives refs'); RebuildIndex requires it.
	Names Names
}

// Store is an open store directory.
type Store struct {
	dir  string
	opts Options
	fs   FS
}

// Open opens the store at dir. With create, a missing store is created.
func Open(dir string, create bool, opts Options) (*Store, error) {
	if opts.LockTimeout == 0 {
		opts.LockTimeout = 30 * time.Second
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if opts.FS == nil {
		opts.FS = OSFS{}
	}
	s := &Store{dir: abs, opts: opts, fs: opts.FS}
	if _, err := os.Stat(filepath.Join(abs, indexFile)); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("store: %w", err)
		}
		if info, jerr := os.Stat(filepath.Join(abs, journalFile)); jerr == nil && info.Size() > 0 {
			// A store whose index is lost: creating an empty one would
			// hide every version it holds.
			return nil, errs.New(errs.IntegrityError, "store", "%s is missing, but the store holds a journal of its versions; "+
				"run `mstore fsck --rebuild-index` to rebuild the index from the blob files and the journal", filepath.Join(abs, indexFile))
		}
		if !create {
			return nil, &errs.Error{Class: errs.NotFound, Pkg: "store", Path: abs, Offset: -1,
				Msg: "no store here (run `mstore init` or `mstore add`, which creates one)"}
		}
		if err := s.create(); err != nil {
			return nil, err
		}
	}
	return s, s.View(s.checkFormat)
}

// Dir is the store's absolute directory.
func (s *Store) Dir() string { return s.dir }

// create makes the store's directories and its index. The index is built
// under a temp name and linked into place, so that index.db, once it
// exists, is always a complete index: a crash while creating a store leaves
// at most a temp file, and of two commands creating the same store at once
// one index wins and the other command uses it.
func (s *Store) create() error {
	if err := checkNewStoreDir(s.dir); err != nil {
		return err
	}
	for _, d := range []string{s.dir, filepath.Join(s.dir, objectsDir), filepath.Join(s.dir, tmpDir)} {
		if err := s.fs.MkdirAll(d); err != nil {
			return fmt.Errorf("store: create: %w", err)
		}
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := filepath.Join(s.dir, tmpDir, indexFile+"."+hex.EncodeToString(rnd[:]))
	defer os.Remove(tmp)
	db, err := bolt.Open(tmp, 0o644, &bolt.Options{Timeout: s.opts.LockTimeout})
	if err != nil {
		return fmt.Errorf("store: create: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if meta.Get(keyFormat) == nil {
			if err := meta.Put(keyFormat, u64(FormatVersion)); err != nil {
				return err
			}
			if err := meta.Put([]byte("chunk_size"), u64(objects.ChunkSize)); err != nil {
				return err
			}
		}
		for _, b := range [][]byte{bucketBlobs, bucketManifests, bucketSuspect} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil // the refs make their buckets when first written
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: create: %w", err)
	}
	final := filepath.Join(s.dir, indexFile)
	err = os.Link(tmp, final)
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOTSUP) {
		// A file system without hard links: rename, unless another
		// command has created the index meanwhile.
		if _, serr := os.Stat(final); errors.Is(serr, os.ErrNotExist) {
			err = os.Rename(tmp, final)
		} else {
			err = nil
		}
	}
	if err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("store: create: %w", err)
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return fmt.Errorf("store: create: %w", err)
	}
	return nil
}

func (s *Store) checkFormat(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return errs.New(errs.IntegrityError, "store", "%s has no format record", filepath.Join(s.dir, indexFile))
	}
	switch v := getU64(meta.Get(keyFormat)); {
	case v > FormatVersion:
		return errs.New(errs.UnsupportedVersion, "store", "store format %d (this build knows %d to %d); use a newer mstore", v, oldestFormat, FormatVersion)
	case v < oldestFormat:
		return errs.New(errs.UnsupportedVersion, "store", "store format %d (this build knows %d to %d)", v, oldestFormat, FormatVersion)
	}
	if v := getU64(meta.Get([]byte("chunk_size"))); v != objects.ChunkSize {
		return errs.New(errs.UnsupportedVersion, "store", "store chunk size %d (this build uses %d)", v, objects.ChunkSize)
	}
	return nil
}

func (s *Store) open(readOnly bool) (*bolt.DB, error) {
	db, err := openBolt(filepath.Join(s.dir, indexFile), &bolt.Options{
		Timeout:         s.opts.LockTimeout,
		ReadOnly:        readOnly,
		InitialMmapSize: indexMmapSize,
	})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, errs.New(errs.Conflict, "store", "another mstore command holds the store's lock (waited %s); try again when it has finished", s.opts.LockTimeout)
	}
	if errs.ClassOf(err) != 0 {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("store: open index: %w", err)
	}
	return db, nil
}

// journalPath is the journal beside the index.
func (s *Store) journalPath() string { return filepath.Join(s.dir, journalFile) }

// View runs fn in a read-only transaction. Values read inside must be copied
// before fn returns.
func (s *Store) View(fn func(tx *bolt.Tx) error) error {
	db, err := s.open(true)
	if err != nil {
		return err
	}
	defer db.Close()
	return guarded(func() error { return db.View(fn) })
}

// journal appends what tx changed that the blob files cannot tell (see
// package journal) to the journal, durably, before tx commits: the journal
// never lacks what the index holds.
func (s *Store) journal(tx *bolt.Tx) error {
	recs, err := journal.Drain(tx)
	if err != nil || len(recs) == 0 {
		return err
	}
	meta := tx.Bucket(bucketMeta)
	seq := getU64(meta.Get(keyJournalSeq)) + 1
	if err := journal.Append(s.journalPath(), seq, recs); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return meta.Put(keyJournalSeq, u64(seq))
}

// Update runs fn in a read-write transaction, committed durably when fn
// returns nil. What fn changed in refs, manifests and packs is journaled
// first.
func (s *Store) Update(fn func(tx *bolt.Tx) error) error {
	db, err := s.open(false)
	if err != nil {
		return err
	}
	err = guarded(func() error {
		return db.Update(func(tx *bolt.Tx) error {
			defer journal.Discard(tx) // what a failed fn noted is not journaled later
			if err := fn(tx); err != nil {
				return err
			}
			if err := s.journal(tx); err != nil {
				return err
			}
			Failpoint(FailBeforeIndexCommit)
			return nil
		})
	})
	if err != nil {
		db.Close()
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	Failpoint(FailAfterIndexCommit)
	return nil
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func getU64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}
