package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/journal"
	"github.com/mstore/mstore/internal/objects"
)

// RebuildReport is what RebuildIndex found and did.
type RebuildReport struct {
	OK          bool     `json:"ok"`
	Blobs       int      `json:"blobs"` // blobs re-hashed and recorded
	Bytes       int64    `json:"bytes"`
	Loose       int      `json:"loose"`
	Packed      int      `json:"packed"`
	Manifests   int      `json:"manifests"` // decoded, digest checked
	Refs        int      `json:"refs"`
	Tags        int      `json:"tags"`
	Batches     int      `json:"journal_batches"`
	Skipped     int      `json:"journal_skipped"` // torn or never-committed batches and lines
	OldIndex    string   `json:"old_index,omitempty"`
	NewIndex    string   `json:"new_index"`
	Problems    []string `json:"problems"` // what could not be rebuilt as it was
	ElapsedSecs float64  `json:"elapsed_seconds"`
}

// RebuildIndex builds index.db again, without reading it, from the blob
// files, the pack files and the journal: every blob re-hashed, every
// manifest read from its blob copy and checked against its digest, every
// ref move, tag, trim and removal replayed in order. The old index.db, if
// any, is moved aside (index.db.damaged-TIME), never deleted. It holds the
// store's lock exclusive, so no add or gc runs meanwhile.
func RebuildIndex(ctx context.Context, dir string, opts Options, workers int) (*RebuildReport, error) {
	start := time.Now()
	if opts.Names == nil { // without it the refs would be lost
		return nil, fmt.Errorf("store: rebuild: no names layer to replay the journal's refs into (use names.RebuildIndex)")
	}
	if opts.LockTimeout == 0 {
		opts.LockTimeout = 30 * time.Second
	}
	if opts.FS == nil {
		opts.FS = OSFS{}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	s := &Store{dir: abs, opts: opts, fs: opts.FS}
	if _, err := os.Stat(filepath.Join(abs, objectsDir)); err != nil {
		return nil, &errs.Error{Class: errs.NotFound, Pkg: "store", Path: abs, Offset: -1, Msg: "no store here (no objects/ folder): nothing to rebuild an index from"}
	}
	lock, err := s.Lock(LockExclusive, 0)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	// tag, rm and trim take no store lock: hold the old index's own (the
	// flock bbolt takes), so that none of them commits to it, and journals,
	// while the journal is being replayed.
	if old, err := os.Open(filepath.Join(abs, indexFile)); err == nil {
		defer old.Close()
		if err := flockWait(old, opts.LockTimeout); err != nil {
			return nil, err
		}
	}

	r := &RebuildReport{Problems: []string{}}
	problem := func(format string, args ...any) { r.Problems = append(r.Problems, fmt.Sprintf(format, args...)) }
	log, err := journal.Read(s.journalPath())
	if err != nil {
		return nil, err
	}
	r.Batches, r.Skipped = len(log.Batches), log.Incomplete+log.Replaced
	if log.Damaged > 0 || log.Orphans > 0 {
		problem("journal: %d batch(es) hold a line that fails its checksum and %d line(s) stand outside any batch: what they recorded is lost", log.Damaged, log.Orphans)
	}
	recs, err := s.recoverBlobs(ctx, log, workers, r, problem)
	if err != nil {
		return nil, err
	}
	manifests := s.recoverManifests(log, recs, r, problem)

	tmp := filepath.Join(abs, tmpDir, indexFile+".rebuild-"+randHex())
	if err := s.fs.MkdirAll(filepath.Dir(tmp)); err != nil {
		return nil, fmt.Errorf("store: rebuild: %w", err)
	}
	defer os.Remove(tmp)
	db, err := bolt.Open(tmp, 0o644, &bolt.Options{Timeout: opts.LockTimeout})
	if err != nil {
		return nil, fmt.Errorf("store: rebuild: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		defer journal.Discard(tx) // the replay journals nothing (its records are in the journal)
		if err := layout(tx); err != nil {
			return err
		}
		all := make([]BlobRecord, 0, len(recs))
		for _, rec := range recs {
			all = append(all, rec)
		}
		if err := RecordBlobs(tx, all); err != nil {
			return err
		}
		for _, d := range sortedDigests(manifests) {
			if err := PutManifest(tx, d, manifests[d]); err != nil {
				return err
			}
		}
		opts.Names.Replay(tx, log, problem)
		replayStore(tx, log, problem)
		if err := tx.Bucket(bucketMeta).Put(keyJournalSeq, u64(log.LastSeq())); err != nil {
			return err
		}
		var problems []error
		r.Refs, r.Tags, problems = opts.Names.EachName(tx, func(kind, name string, d objects.Digest, what string) {
			if _, ok := manifests[d]; !ok && !strings.Contains(name, "~") {
				problem("%s %s names version %s, whose manifest could not be recovered", kind, name, d.Short())
			}
		})
		if len(problems) > 0 {
			return problems[0]
		}
		_, err = journal.Drain(tx) // what the replay noted is in the journal already
		return err
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("store: rebuild: %w", err)
	}
	if err := s.installIndex(tmp, r); err != nil {
		return nil, err
	}
	r.OK = len(r.Problems) == 0
	r.ElapsedSecs = time.Since(start).Seconds()
	return r, nil
}

// flockWait takes f's flock exclusive, waiting at most wait.
func flockWait(f *os.File, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("store: lock the old index: %w", err)
		}
		if time.Now().After(deadline) {
			return errs.New(errs.Conflict, "store", "another mstore command has the index open (waited %s); try again when it has finished", wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func randHex() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// layout creates the buckets and format record of an empty index.
func layout(tx *bolt.Tx) error {
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return err
	}
	if err := meta.Put(keyFormat, u64(FormatVersion)); err != nil {
		return err
	}
	if err := meta.Put([]byte("chunk_size"), u64(objects.ChunkSize)); err != nil {
		return err
	}
	for _, b := range [][]byte{bucketBlobs, bucketManifests, bucketSuspect} {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	return nil
}

// installIndex moves the old index aside and the new one into place.
func (s *Store) installIndex(tmp string, r *RebuildReport) error {
	final := filepath.Join(s.dir, indexFile)
	if _, err := os.Lstat(final); err == nil {
		old := final + ".damaged-" + time.Now().UTC().Format("20060102T150405Z") + "-" + randHex()[:4]
		if err := s.fs.Rename(final, old); err != nil {
			return fmt.Errorf("store: rebuild: move the old index aside: %w", err)
		}
		r.OldIndex = relPath(s, old)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("store: rebuild: %w", err)
	}
	if err := s.fs.Rename(tmp, final); err != nil {
		return fmt.Errorf("store: rebuild: %w", err)
	}
	r.NewIndex = indexFile
	if err := s.fs.SyncDir(s.dir); err != nil {
		return fmt.Errorf("store: rebuild: %w", err)
	}
	return nil
}

// cand is a packed copy the journal places, with its place in the journal
// (later copies are newer).
type cand struct {
	rec   BlobRecord
	order int
}

// recoverBlobs re-hashes every loose blob file and every packed blob the
// journal places, and returns a record of each blob with a good copy
// (loose first, else the newest packed copy).
func (s *Store) recoverBlobs(ctx context.Context, log *journal.Log, workers int, r *RebuildReport, problem func(string, ...any)) (map[objects.Digest]BlobRecord, error) {
	loose := map[objects.Digest]StoredFile{}
	packs := map[PackID]StoredFile{}
	err := s.WalkFiles(func(f StoredFile) error {
		switch f.Kind {
		case FileLoose:
			loose[f.Digest] = f
		case FilePack:
			packs[f.Pack] = f
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Packed copies in journal order: later records are newer copies.
	byPack := map[PackID][]cand{}
	var coded []cand // checked after the raw copies: a delta needs its base
	order := 0
	named := map[PackID]bool{}
	for _, b := range log.Batches {
		for _, rec := range b.Records {
			if rec.Op != journal.OpPacked {
				continue
			}
			var id PackID
			if raw, err := hex.DecodeString(rec.Pack); err != nil || len(raw) != len(id) {
				problem("journal batch %d: bad pack id %q", b.Seq, rec.Pack)
				continue
			} else {
				copy(id[:], raw)
			}
			order++
			named[id] = true
			if f, ok := packs[id]; !ok || !withinPack(rec.Offset, rec.Size, f.Size) {
				continue // the pack is gone (gc) or shorter: not this copy
			}
			br := BlobRecord{Digest: rec.Digest, Size: rec.Size, Encoding: EncodingPacked, Pack: id, Offset: rec.Offset}
			if rec.Enc != "" {
				c, ok := ParseCoding(rec.Enc)
				if !ok || !c.coded() || rec.Raw <= rec.Size || rec.Raw > objects.ChunkSize {
					problem("journal batch %d: blob %s: bad coding %q (%d of %d bytes)", b.Seq, rec.Digest.Short(), rec.Enc, rec.Size, rec.Raw)
					continue
				}
				br.Coding, br.Size, br.Stored, br.Base = c, rec.Raw, rec.Size, rec.Base
				coded = append(coded, cand{br, order})
				continue
			}
			byPack[id] = append(byPack[id], cand{br, order})
		}
	}
	for id, f := range packs {
		if !named[id] {
			problem("pack %s: the journal does not say what it holds; its blobs cannot be recovered (it is left in place)", f.Rel)
		}
	}

	var mu sync.Mutex
	good := map[objects.Digest]BlobRecord{}
	goodOrder := map[objects.Digest]int{}
	parent := ctx // the group's ends with it
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(workerCount(workers))
	for d, f := range loose {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			err := verifyFile(f)
			mu.Lock()
			defer mu.Unlock()
			r.Blobs++
			r.Bytes += f.Size
			if err != nil {
				problem("blob file %s: %v (left out)", f.Rel, err)
				return nil
			}
			good[d] = BlobRecord{Digest: d, Size: f.Size, Encoding: EncodingRaw}
			goodOrder[d] = -1
			return nil
		})
	}
	for id, cands := range byPack {
		f := packs[id]
		sort.Slice(cands, func(i, j int) bool { return cands[i].rec.Offset < cands[j].rec.Offset })
		for start := 0; start < len(cands); {
			end, size := start, int64(0)
			for end < len(cands) && size < hashBatch {
				size += cands[end].rec.Size
				end++
			}
			run := cands[start:end]
			start = end
			g.Go(func() error {
				file, err := os.Open(f.Path)
				if err != nil {
					return fmt.Errorf("store: rebuild: %w", err)
				}
				defer file.Close()
				at := func(i int) (int64, int64) { return run[i].rec.Offset, run[i].rec.Size }
				hashPacked(file, len(run), at, func(i int, got objects.Digest, err error) {
					c := run[i]
					mu.Lock()
					defer mu.Unlock()
					r.Blobs++
					r.Bytes += c.rec.Size
					switch {
					case err != nil || got != c.rec.Digest:
						// An old or corrupt copy: another may be good.
					case goodOrder[c.rec.Digest] == 0 || goodOrder[c.rec.Digest] > 0 && c.order > goodOrder[c.rec.Digest]:
						good[c.rec.Digest], goodOrder[c.rec.Digest] = c.rec, c.order
					}
				})
				return ctx.Err()
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := s.recoverCoded(parent, coded, good, goodOrder, r); err != nil {
		return nil, err
	}
	for _, rec := range good {
		if rec.Encoding == EncodingRaw {
			r.Loose++
		} else {
			r.Packed++
		}
	}
	return good, nil
}

// recoverCoded decodes and checks every coded packed copy the journal
// places: first those that need no base, then the deltas, each against the
// good copy of its base (never itself a delta). A copy that does not decode
// to its digest is left out, as a raw one that does not hash to it is.
func (s *Store) recoverCoded(ctx context.Context, coded []cand, good map[objects.Digest]BlobRecord, goodOrder map[objects.Digest]int, r *RebuildReport) error {
	reader := s.NewBlobReader()
	defer reader.Close()
	for _, pass := range []Coding{CodingGrouped, CodingDelta} {
		for _, c := range coded {
			if err := ctx.Err(); err != nil {
				return err
			}
			if c.rec.Coding != pass {
				continue
			}
			rec := c.rec
			if pass == CodingDelta {
				b, ok := good[rec.Base]
				if !ok || b.Coding == CodingDelta {
					continue
				}
				rec.BaseRec = &b
			}
			_, err := reader.Read(rec, nil)
			r.Blobs++
			r.Bytes += rec.Size
			if err == nil && (goodOrder[rec.Digest] == 0 || goodOrder[rec.Digest] > 0 && c.order > goodOrder[rec.Digest]) {
				good[rec.Digest], goodOrder[rec.Digest] = rec, c.order
			}
		}
	}
	return nil
}

// recoverManifests reads every manifest the journal names from its blob
// copy, checks its digest and that it decodes, and reports those that need
// blobs no copy was found of.
func (s *Store) recoverManifests(log *journal.Log, recs map[objects.Digest]BlobRecord, r *RebuildReport, problem func(string, ...any)) map[objects.Digest][]byte {
	reader := s.NewBlobReader()
	defer reader.Close()
	out := map[objects.Digest][]byte{}
	for _, b := range log.Batches {
		for _, rec := range b.Records {
			if rec.Op != journal.OpManifest || out[rec.Digest] != nil {
				continue
			}
			br, ok := recs[rec.Digest]
			if !ok {
				// Removed by gc, or lost: the refs and tags that still
				// name it are reported after the replay.
				continue
			}
			enc, err := reader.Read(br, nil)
			if err != nil {
				problem("version %s: %v", rec.Digest.Short(), err)
				continue
			}
			m, err := objects.DecodeManifest(enc)
			if err != nil {
				problem("version %s: its manifest does not decode: %v", rec.Digest.Short(), err)
				continue
			}
			var lacking []string
			for _, d := range m.Blobs() {
				if _, ok := recs[d]; !ok {
					lacking = append(lacking, d.Short())
				}
			}
			if len(lacking) > 0 {
				problem("version %s needs %d blob(s) of which no good copy was found (e.g. %s): recorded anyway, `mstore fsck` names them",
					rec.Digest.Short(), len(lacking), strings.Join(lacking[:min(3, len(lacking))], ", "))
			}
			out[rec.Digest] = enc
			r.Manifests++
		}
	}
	return out
}

// replayStore applies the journal's records of the store's own (the delta
// bases of `add --base`, the named remotes); the names' records are the
// Names layer's.
func replayStore(tx *bolt.Tx, log *journal.Log, problem func(string, ...any)) {
	for _, b := range log.Batches {
		for _, rec := range b.Records {
			var err error
			what := rec.Name
			switch rec.Op {
			case journal.OpBase:
				what = rec.Digest.Short()
				err = putDeltaBase(tx, rec.Digest, rec.Base)
			case journal.OpRemote:
				err = PutRemote(tx, rec.Name, rec.Msg)
			case journal.OpRemoteRm:
				_, err = RemoveRemote(tx, rec.Name)
			default:
				continue
			}
			if err != nil {
				problem("journal batch %d: %s %s: %v", b.Seq, rec.Op, what, err)
			}
		}
	}
}
