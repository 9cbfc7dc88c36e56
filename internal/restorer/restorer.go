package restorer

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/gcpace"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/progress"
	"github.com/mstore/mstore/internal/store"
)

// Options say how to check a version out.
type Options struct {
	// Format is the container to write; "" means the one it was added as.
	Format string
	// WriteOptions are what the planners see (re-sharding, selected
	// tensors, alignment, ONNX external data, GGUF splits, casts, what may
	// be left out, MPK extraction, the model's name); which of them a
	// target honours is the target codec's to say (formats.Planner.Honours).
	formats.WriteOptions

	// Force replaces a destination that holds an earlier checkout of this
	// store, unchanged since; anything else there is refused (conflict).
	Force bool
	// Unrecorded keeps no record of the checkout: it is a temporary one
	// that another step moves the files out of (checkout --layout).
	Unrecorded bool
	Workers    int
	Progress   progress.Reporter
}

// Result describes a checkout.
type Result struct {
	Digest   objects.Digest `json:"digest"`
	Dest     string         `json:"dest"`
	Format   string         `json:"format"`
	Files    int            `json:"files"`
	Tensors  int            `json:"tensors"`
	Bytes    int64          `json:"bytes"`
	Relayout bool           `json:"relayout"` // false: byte-identical to what was added
	// Tree: the files are a plain tree (an extracted archive), each checked
	// against its stored digest. Encoded: a stored file was written
	// through its format's canonical encoder (an MPK archive's gzip).
	Tree    bool `json:"tree,omitempty"`
	Encoded bool `json:"encoded,omitempty"`
	// RemovedLeftovers are what killed checkouts had left beside DEST and
	// this one removed.
	RemovedLeftovers []string `json:"removed_leftovers,omitempty"`
	// Note is a remark for the user, e.g. that the checkout is not recorded.
	Note string `json:"note,omitempty"`
	// LeftOut is what the version holds beside its tensors that this
	// checkout did not write (--drop-non-tensors).
	LeftOut []string `json:"left_out,omitempty"`
}

// Checkout writes version d of st into dest.
func Checkout(ctx context.Context, st *store.Store, d objects.Digest, dest string, opts Options) (*Result, error) {
	lock, err := st.Lock(store.LockShared, 0) // gc waits until the blobs are read
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	building := gcpace.Raise()
	defer building()
	var m *objects.Manifest
	if err := st.View(func(tx *bolt.Tx) (err error) {
		m, err = st.Manifest(tx, d)
		return err
	}); err != nil {
		return nil, err
	}
	if relayout(m, opts) {
		// A re-layout's planning makes garbage by the tensor (frames,
		// casts, copies of the tensor list): at gcpace's raised target the
		// heap of an npz of 100,000 tensors reached 450 MB with 146 MB
		// live, and at the default twice the plan.
		building()
		defer gcpace.Tighten()()
	}
	p, err := makePlan(m, opts, storedFrames(st, m))
	if err != nil {
		return nil, err
	}
	blobs, err := openBlobs(st, p)
	if err != nil {
		return nil, err
	}
	defer blobs.Close()
	building() // what follows makes garbage: copy buffers, a re-layout's casts
	if dest, err = filepath.Abs(dest); err != nil {
		return nil, fmt.Errorf("checkout: %w", err)
	}
	parent := filepath.Dir(dest)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("checkout: %w", err)
	}
	key, err := canonicalDest(dest)
	if err != nil {
		return nil, err
	}
	old, err := checkDest(st, dest, key, opts.Force)
	if err != nil {
		return nil, err
	}
	res := &Result{Digest: d, Dest: dest, Format: p.format, Files: len(p.files), Tensors: len(p.tensors),
		Bytes: p.bytes(), Relayout: p.relayout, Tree: p.tree, Encoded: p.encoded(), LeftOut: p.leftOut, RemovedLeftovers: cleanLeftovers(parent)}
	w, err := newWorkDir(parent, filepath.Base(dest))
	if err != nil {
		return nil, err
	}
	defer w.close() // removes the temp tree unless it was published

	if opts.Progress != nil {
		opts.Progress.Start(p.bytes())
		defer opts.Progress.Finish()
	}
	if err := writeAll(ctx, blobs, p, w.dir, opts); err != nil {
		return nil, err
	}
	blobs.recs = nil
	p.written()
	if p.relayout && !p.tree { // a tree's files were checked as they were written
		if err := verifyRelayout(ctx, p, w.dir); err != nil {
			return nil, err
		}
	}
	out, err := publish(st, w, dest, key, d, old)
	if err != nil {
		return nil, err
	}
	if opts.Unrecorded {
		st.RemoveCheckoutRecord(recordName(key, w.dev, w.ino)) // one already gone is fine
	}
	res.Note = joinNotes(p.note, out.note)
	return res, nil
}

// writeAll writes every file of the plan under root, two files at a time
// with the blob fetches of each running ahead of its writer.
func writeAll(ctx context.Context, blobs pieceSource, p *plan, root string, opts Options) error {
	n := opts.Workers
	if n <= 0 {
		n = runtime.NumCPU() + 1
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(2)
	for _, f := range p.files {
		g.Go(func() error {
			write := writeFile
			if bs, ok := blobs.(*blobSource); ok && copyable(f) {
				write = func(ctx context.Context, _ pieceSource, f planFile, root string, n int, prog progress.Reporter) error {
					return copyStored(ctx, bs, f, root, n, prog)
				}
			}
			if err := write(ctx, blobs, f, root, n, opts.Progress); err != nil {
				return err
			}
			store.Failpoint(store.FailCheckoutFileWritten)
			return nil
		})
	}
	return g.Wait()
}

func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("checkout: %w", err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("checkout: syncfs: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("checkout: %w", err)
	}
	defer f.Close()
	return f.Sync()
}

// MatchAny reports whether name matches one of the glob patterns.
func MatchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// ValidPatterns checks glob patterns before any work is done.
func ValidPatterns(patterns []string) error {
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil || strings.TrimSpace(p) == "" {
			return errs.New(errs.SchemaError, "checkout", "--tensors pattern %q is not a valid glob", p)
		}
	}
	return nil
}

// ReadSmallFile returns the bytes of a stored file of m of at most limit
// bytes (config.json for `show`), each blob verified.
func ReadSmallFile(st *store.Store, m *objects.Manifest, p string, limit int64) ([]byte, error) {
	f := m.File(p)
	if f == nil {
		return nil, errs.New(errs.NotFound, "checkout", "%s is not part of this version", p)
	}
	if f.Size > limit {
		return nil, errs.New(errs.SizeLimitExceeded, "checkout", "%s is %d bytes, more than %d", p, f.Size, limit)
	}
	lock, err := st.Lock(store.LockShared, 0) // gc waits until the blobs are read
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	pf := storedFile(m, *f)
	blobs, err := openBlobs(st, &plan{files: []planFile{pf}})
	if err != nil {
		return nil, err
	}
	defer blobs.Close()
	out := make([]byte, 0, f.Size)
	for _, pc := range pf.pieces {
		switch {
		case pc.zeros:
			out = append(out, make([]byte, pc.size)...)
		default:
			b, err := blobs.readOne(pc, nil)
			if err != nil {
				return nil, err
			}
			out = append(out, b...)
		}
	}
	return out, objects.Verify(out, f.Digest, p)
}

// blobSource reads the blobs of a plan, with their index records looked up
// once, up front, in one walk of the index: piece.rec points into recs.
type blobSource struct {
	*store.BlobReader
	recs *store.RecordTable
}

// openBlobs looks up the records of every blob p reads and points each
// piece at its own (a derived piece's source chunks become pieces of their
// own, derived.chunks).
func openBlobs(st *store.Store, p *plan) (*blobSource, error) {
	n := 0 // the blobs read: not a re-layout's frames (200,000 for an npz of 100,000 arrays)
	for _, f := range p.files {
		for _, pc := range f.pieces {
			switch {
			case pc.derived != nil && pc.derived.part == nil:
				n += len(pc.derived.source.Chunks)
			case pc.derived != nil || pc.blob != nil:
				n++
			}
		}
	}
	need := make([]objects.Digest, 0, n)
	point := func(pc *piece) {
		need = append(need, *pc.blob)
		pc.rec = int32(len(need))
	}
	for _, f := range p.files {
		for i := range f.pieces {
			pc := &f.pieces[i]
			switch {
			case pc.derived != nil && pc.derived.part != nil: // its one chunk
				d := pc.derived
				d.chunks = []piece{{blob: &d.source.Chunks[d.part.index], size: d.readSize()}}
				point(&d.chunks[0])
			case pc.derived != nil:
				src := pc.derived.source
				pc.derived.chunks = chunkPieces(src.Size, src.Chunks)
				for j := range pc.derived.chunks {
					point(&pc.derived.chunks[j])
				}
			case pc.frame == nil && !pc.zeros:
				point(pc)
			}
		}
	}
	src := &blobSource{BlobReader: st.NewBlobReader()}
	err := st.View(func(tx *bolt.Tx) (err error) {
		src.recs, err = store.RecordTableInOrder(tx, need)
		return err
	})
	if err != nil {
		src.Close()
		return nil, err
	}
	return src, nil
}

// record is the index record of a blob piece, checked against the size
// the manifest gives it.
func (b *blobSource) record(pc piece) (store.BlobRecord, error) {
	if pc.blob == nil {
		return store.BlobRecord{}, fmt.Errorf("checkout: a piece of %d bytes that is no blob was looked up", pc.size)
	}
	if pc.rec <= 0 || int(pc.rec) > b.recs.Len() {
		return store.BlobRecord{}, fmt.Errorf("checkout: blob %s was not looked up", pc.blob.Short())
	}
	// The record of the digest looked up for pc: a piece pointed at
	// another's would fail its blob's check, which every read makes.
	rec := b.recs.At(int(pc.rec-1), *pc.blob)
	if rec.Size != pc.size {
		return store.BlobRecord{}, errs.New(errs.IntegrityError, "checkout", "blob %s is recorded as %d bytes, the manifest needs %d", pc.blob.Short(), rec.Size, pc.size)
	}
	return rec, nil
}

// read returns the verified bytes of the pieces among pcs that are read
// from the store (isRead), in order: a blob's, or what a derived piece
// makes of its source tensor. The blobs are read together (readBlobs).
func (b *blobSource) read(pcs []piece, buf []byte) (_ [][]byte, err error) {
	// A part of a tensor made a chunk at a time ends its turn here when it
	// was not made, with the read's error: the parts after it, in other
	// fetches, wait for it.
	defer func() {
		for i := range pcs {
			if d := pcs[i].derived; d != nil && d.part != nil {
				d.part.finish(cmp.Or(err, errNotMade)) // a part made has finished already
			}
		}
	}()
	var recs []store.BlobRecord
	reads := 0
	for i := range pcs {
		pc := &pcs[i]
		if !pc.isRead() {
			continue
		}
		reads++
		if pc.derived == nil {
			rec, err := b.record(*pc)
			if err != nil {
				return nil, err
			}
			recs = append(recs, rec)
			continue
		}
		for _, c := range pc.derived.chunks {
			rec, err := b.record(c)
			if err != nil {
				return nil, err
			}
			recs = append(recs, rec)
		}
	}
	if reads == 1 && len(recs) > 1 { // one derived piece of several chunks
		for i := range pcs {
			if pcs[i].isRead() {
				made, err := b.deriveAlone(pcs[i], recs)
				return [][]byte{made}, err
			}
		}
	}
	data, err := b.readBlobs(recs, buf)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, 0, reads)
	k := 0 // data[k] is the next piece's or chunk's
	for i := range pcs {
		pc := &pcs[i]
		switch {
		case pc.derived != nil:
			// A generated tensor's source is empty: no chunks.
			n := len(pc.derived.chunks)
			var src []byte
			switch n {
			case 0:
			case 1:
				src = data[k]
			default:
				src = bytes.Join(data[k:k+n], nil)
			}
			made, err := pc.derived.apply(src, pc.size)
			if err != nil {
				return nil, err
			}
			out = append(out, made)
			k += n
		case pc.isRead():
			out = append(out, data[k])
			k++
		}
	}
	return out, nil
}

// readBlobs returns the verified bytes of the blobs recs, in buf when it
// is large enough. Raw blobs lying end to end in a pack are read with one
// read and hashed eight at a time (store.BlobReader.ReadRawInto); a batch
// with a coded blob is read a blob at a time.
func (b *blobSource) readBlobs(recs []store.BlobRecord, buf []byte) ([][]byte, error) {
	if len(recs) == 1 {
		data, err := b.Read(recs[0], buf)
		return [][]byte{data}, err
	}
	coded := false
	for _, rec := range recs {
		coded = coded || rec.Coded()
	}
	if !coded {
		return b.ReadRawInto(recs, buf, true)
	}
	out := make([][]byte, len(recs))
	for i, rec := range recs {
		var err error
		if out[i], err = b.Read(rec, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// deriveAlone makes a derived piece whose source is several chunks (recs,
// in order): each is read into its place in one buffer of the source's
// size, not read and then copied there.
func (b *blobSource) deriveAlone(pc piece, recs []store.BlobRecord) ([]byte, error) {
	src := pc.derived.source
	whole := make([]byte, src.Size)
	for i, rec := range recs {
		off, n := objects.ChunkBounds(src.Size, i)
		if rec.Size != n {
			return nil, errs.New(errs.IntegrityError, "checkout", "tensor %q: chunk %d is recorded as %d bytes, its place holds %d", src.Name, i, rec.Size, n)
		}
		got, err := b.Read(rec, whole[off:off:off+n])
		if err != nil {
			return nil, err
		}
		if len(got) > 0 && &got[0] != &whole[off] {
			copy(whole[off:], got)
		}
	}
	return pc.derived.apply(whole, pc.size)
}

// readOne returns the verified bytes of one blob piece, in buf when it is
// large enough.
func (b *blobSource) readOne(pc piece, buf []byte) ([]byte, error) {
	rec, err := b.record(pc)
	if err != nil {
		return nil, err
	}
	return b.Read(rec, buf)
}
