package repack

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sync/errgroup"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
)

// FailAfterBatch is the failpoint after a batch's packs are durable and
// before its records move.
const FailAfterBatch = "repack-after-batch"

// batchBytes is the raw bytes coded per batch: what an interrupt or a
// crash can lose.
const batchBytes = 512 << 20

// Options say how a repack runs.
type Options struct {
	// Workers bounds the blobs coded at once; zero means one per CPU.
	Workers int
	// LockWait bounds the wait for the store's lock (and, at the end, for
	// the exclusive lock the deletes need); zero means the store's default.
	LockWait time.Duration
}

// Result is what a repack did.
type Result struct {
	Examined int `json:"examined"` // blobs read and coded
	Grouped  int `json:"grouped"`
	Deltas   int `json:"deltas"`
	KeptRaw  int `json:"kept_raw"` // coding did not pay
	// KeptGrouped counts grouped blobs with a delta base whose delta was
	// not smaller: they stay as they are.
	KeptGrouped int     `json:"kept_grouped"`
	Unreadable  int     `json:"unreadable"`
	RawBytes    int64   `json:"raw_bytes"`    // of the blobs examined
	CodedRaw    int64   `json:"coded_raw"`    // raw bytes of the blobs now coded
	CodedStored int64   `json:"coded_stored"` // what they take now
	Batches     int     `json:"batches"`
	Workers     int     `json:"workers"`
	Elapsed     float64 `json:"elapsed_seconds"`
	MBPerSec    float64 `json:"mb_per_sec"`          // raw MB (1e6) examined per second
	MBPerCore   float64 `json:"mb_per_sec_per_core"` // … per worker
	// CPUSeconds is the CPU time the run took (every core, user and
	// system); MBPerCPUSecond the raw MB examined per CPU second: a
	// core's throughput however busy the machine is with other work.
	CPUSeconds     float64 `json:"cpu_seconds"`
	MBPerCPUSecond float64 `json:"mb_per_cpu_second"`
	// Superseded counts the raw files the coded copies replace; Deleted
	// those removed at the end; the rest are left to gc.
	Superseded int      `json:"superseded_files"`
	Deleted    int      `json:"deleted_files"`
	Problems   []string `json:"problems"`
	// Interrupted is set when the run stopped early: what its committed
	// batches did stays; run repack again to go on.
	Interrupted bool `json:"interrupted"`
}

// Run takes the store's lock shared, plans and executes.
func Run(ctx context.Context, st *store.Store, opts Options) (*Plan, *Result, error) {
	lock, err := st.Lock(store.LockShared, opts.LockWait)
	if err != nil {
		return nil, nil, err
	}
	p, err := NewPlan(ctx, st)
	if err != nil {
		lock.Unlock()
		return nil, nil, err
	}
	res, err := p.Execute(ctx, st, opts)
	lock.Unlock()
	if res != nil {
		res.Deleted = deleteSuperseded(st, p, opts, res)
	}
	return p, res, err
}

type coded struct {
	old    store.BlobRecord
	rec    store.BlobRecord
	stored []byte
}

// Execute codes the plan's blobs, batch by batch. The caller holds the
// store's lock shared.
func (p *Plan) Execute(ctx context.Context, st *store.Store, opts Options) (*Result, error) {
	start, cpuStart := time.Now(), cpuTime()
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	res := &Result{Workers: workers, Problems: []string{}}
	defer func() {
		res.Elapsed = time.Since(start).Seconds()
		if res.Elapsed > 0 {
			res.MBPerSec = float64(res.RawBytes) / 1e6 / res.Elapsed
			res.MBPerCore = res.MBPerSec / float64(workers)
		}
		if res.CPUSeconds = (cpuTime() - cpuStart).Seconds(); res.CPUSeconds > 0 {
			res.MBPerCPUSecond = float64(res.RawBytes) / 1e6 / res.CPUSeconds
		}
	}()
	reader := st.NewBlobReader()
	defer reader.Close()
	reader.ReadUncached() // each raw blob is read once, then superseded
	// A batch is coded while the one before it is made durable and
	// committed: syncs and the index commit overlap the coding.
	var mu sync.Mutex // res
	var committing chan error
	wait := func() error {
		if committing == nil {
			return nil
		}
		err := <-committing
		committing = nil
		return err
	}
	stop := func(done int, err error) (*Result, error) {
		if werr := wait(); err == nil {
			err = werr
		}
		if ctx.Err() != nil {
			res.Interrupted = true
			return res, fmt.Errorf("repack: interrupted after %d of %d blobs (what is done stays; run `mstore repack` again to go on): %w", done, len(p.items), ctx.Err())
		}
		return res, err
	}
	for i := 0; i < len(p.items); {
		j, size := i, int64(0)
		for j < len(p.items) && size < batchBytes {
			size += p.items[j].Rec.Size
			j++
		}
		w, old, err := p.codeBatch(ctx, st, reader, p.items[i:j], workers, res, &mu)
		if err != nil {
			return stop(i, err)
		}
		if err := wait(); err != nil {
			w.Abort()
			return stop(i, err)
		}
		committing = make(chan error, 1)
		go func() { committing <- p.commitBatch(ctx, st, w, old, res, &mu) }()
		i = j
	}
	if err := wait(); err != nil {
		return stop(len(p.items), err)
	}
	return res, nil
}

// codeBatch codes items into new packs (not yet durable) and returns their
// writer and the records the coded blobs replace.
func (p *Plan) codeBatch(ctx context.Context, st *store.Store, reader *store.BlobReader, items []Item, workers int, res *Result, mu *sync.Mutex) (*store.BlobWriter, map[objects.Digest]store.BlobRecord, error) {
	// Coded blobs go straight into the batch's packs: memory holds only
	// the blobs in flight.
	w := st.NewBlobWriter(nil)
	w.WriteUncached() // coded bytes a checkout may not read soon: past the page cache
	old := map[objects.Digest]store.BlobRecord{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, it := range items {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			op := outBufs.Get().(*[]byte)
			defer outBufs.Put(op)
			c, err := p.code(reader, it, op)
			if err == nil && c != nil {
				if _, werr := w.PutStored(c.rec, c.stored); werr != nil {
					return fmt.Errorf("repack: %w", werr)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.Examined++
			res.RawBytes += it.Rec.Size
			switch {
			case err != nil:
				res.Unreadable++
				res.Problems = append(res.Problems, err.Error())
			case c == nil && it.Rec.Coded():
				res.KeptGrouped++
			case c == nil:
				res.KeptRaw++
			default:
				old[c.old.Digest] = c.old
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		w.Abort()
		return nil, nil, err
	}
	return w, old, nil
}

// commitBatch makes a coded batch durable and moves its records.
func (p *Plan) commitBatch(ctx context.Context, st *store.Store, w *store.BlobWriter, old map[objects.Digest]store.BlobRecord, res *Result, mu *sync.Mutex) error {
	defer w.Abort()
	if len(old) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	recs, err := w.Commit()
	if err != nil {
		return fmt.Errorf("repack: %w", err)
	}
	store.Failpoint(FailAfterBatch)
	err = st.Update(func(tx *bolt.Tx) error {
		if err := checkDepthOne(tx, recs); err != nil {
			return err
		}
		return store.ReplaceBlobRecords(tx, old, recs)
	})
	if err != nil {
		return fmt.Errorf("repack: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	res.Batches++
	for _, r := range recs {
		o := old[r.Digest]
		if o.Encoding == store.EncodingRaw {
			res.Superseded++
		}
		res.CodedRaw += r.Size
		res.CodedStored += r.StoredSize()
		if r.Coding == store.CodingDelta {
			res.Deltas++
		} else {
			res.Grouped++
		}
	}
	return nil
}

// testHookCoded sees each coding before it is checked (tests break one).
var testHookCoded = func(stored []byte) {}

var (
	chunkBufs = sync.Pool{New: func() any { b := make([]byte, 0, objects.ChunkSize); return &b }}
	outBufs   = sync.Pool{New: func() any { return new([]byte) }}
)

// code reads one blob (its digest checked) and codes it into *out (grown
// as needed; what code returns aliases it until the caller puts it back);
// nil means raw is smallest.
func (p *Plan) code(reader *store.BlobReader, it Item, out *[]byte) (*coded, error) {
	// The raw bytes and the base's are read into pooled chunk buffers, and
	// coded into a pooled one: a fresh 4 MiB a blob is zeroed memory and
	// garbage to collect, which cost a repack a fifth of its CPU. What
	// code returns never aliases the raw bytes.
	rp, bp := chunkBufs.Get().(*[]byte), chunkBufs.Get().(*[]byte)
	defer chunkBufs.Put(rp)
	defer chunkBufs.Put(bp)
	raw, err := reader.Read(it.Rec, (*rp)[:0])
	if err != nil {
		return nil, err
	}
	*rp = raw[:0]
	var base []byte
	if it.Base != nil {
		// The base's record as planned: a batch committed since may have
		// coded it, but the copy planned stays readable until the end.
		if br, ok := p.seen[*it.Base]; ok {
			if base, err = reader.Read(br, (*bp)[:0]); err == nil {
				*bp = base[:0]
			} else {
				base = nil // code it without: the base's own problem is fsck's
			}
		}
	}
	var coding store.Coding
	var stored []byte
	switch {
	case it.Rec.Coded() && base == nil:
		return nil, nil
	case it.Rec.Coded():
		// Grouped already: only a smaller delta replaces it.
		if stored = store.AppendDelta(*out, raw, it.Width, base); int64(len(stored)) >= it.Rec.Stored {
			return nil, nil
		}
		coding = store.CodingDelta
	default:
		if coding, stored = store.AppendBlob(*out, raw, it.Width, base); coding == store.CodingRaw {
			return nil, nil
		}
	}
	if cap(stored) > cap(*out) && cap(stored) <= 2*objects.ChunkSize {
		*out = stored[:0] // the grown buffer is the one to keep
	}
	rec := store.BlobRecord{Digest: it.Rec.Digest, Size: it.Rec.Size, Coding: coding}
	if coding == store.CodingDelta {
		rec.Base = *it.Base
	}
	testHookCoded(stored)
	// What replaces raw must give raw back.
	dp := chunkBufs.Get().(*[]byte)
	defer chunkBufs.Put(dp)
	if *dp, err = store.CheckDecodes(rec, stored, raw, base, *dp); err != nil {
		return nil, err
	}
	return &coded{old: it.Rec, rec: rec, stored: stored}, nil
}

// checkDepthOne refuses a batch that would make a chain: a new delta whose
// base is a delta, or a new delta of a blob that a recorded delta has as
// its base (another repack ran meanwhile).
func checkDepthOne(tx *bolt.Tx, recs []store.BlobRecord) error {
	newDelta := map[objects.Digest]bool{}
	for _, r := range recs {
		if r.Coding == store.CodingDelta {
			newDelta[r.Digest] = true
		}
	}
	if len(newDelta) == 0 {
		return nil
	}
	conflict := func(d objects.Digest) error {
		return errs.New(errs.Conflict, "repack", "blob %s would be a delta against a delta (another repack ran meanwhile); run `mstore repack` again", d.Short())
	}
	for _, r := range recs {
		if r.Coding != store.CodingDelta {
			continue
		}
		if newDelta[r.Base] {
			return conflict(r.Digest)
		}
		b, ok, err := store.Blob(tx, r.Base)
		if err != nil {
			return err
		}
		if !ok || b.Coding == store.CodingDelta {
			return conflict(r.Digest)
		}
	}
	return store.ForEachBlob(tx, func(r store.BlobRecord) error {
		if r.Coding == store.CodingDelta && newDelta[r.Base] {
			return conflict(r.Base)
		}
		return nil
	})
}

// deleteSuperseded removes, under the exclusive lock, the raw blob files
// whose blobs the index now records coded in a pack. Without the lock
// (a checkout is reading) they stay for gc.
func deleteSuperseded(st *store.Store, p *Plan, opts Options, res *Result) int {
	if res.Batches == 0 {
		return 0
	}
	wait := opts.LockWait
	if wait == 0 {
		wait = 5 * time.Second
	}
	lock, err := st.Lock(store.LockExclusive, wait)
	if err != nil {
		res.Problems = append(res.Problems, fmt.Sprintf("the %d raw files the coded copies replace stay until `mstore gc`: %v", res.Superseded, err))
		return 0
	}
	defer lock.Unlock()
	var paths []string
	err = st.View(func(tx *bolt.Tx) error {
		recorded := map[store.PackID]bool{}
		err := store.ForEachBlob(tx, func(r store.BlobRecord) error {
			if r.Encoding == store.EncodingPacked {
				recorded[r.Pack] = true
			}
			return nil
		})
		if err != nil {
			return err
		}
		packs := map[store.PackID]bool{}
		for _, it := range p.items {
			if it.Rec.Encoding == store.EncodingPacked {
				// A pack none of whose blobs is recorded there any more.
				if !recorded[it.Rec.Pack] && !packs[it.Rec.Pack] {
					packs[it.Rec.Pack] = true
					paths = append(paths, st.PackPath(it.Rec.Pack))
				}
				continue
			}
			r, ok, err := store.Blob(tx, it.Rec.Digest)
			if err != nil {
				return err
			}
			if ok && r.Encoding != store.EncodingRaw {
				paths = append(paths, st.BlobPath(it.Rec.Digest))
			}
		}
		return nil
	})
	if err != nil {
		res.Problems = append(res.Problems, fmt.Sprintf("superseded raw files stay until `mstore gc`: %v", err))
		return 0
	}
	n := 0
	for _, path := range paths {
		if err := st.RemoveFile(path); err != nil {
			res.Problems = append(res.Problems, err.Error())
			continue
		}
		n++
	}
	return n
}
