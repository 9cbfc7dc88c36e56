package archiver

import (
	"fmt"
	"io"
	"reflect"
	"sort"
	"sync"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

// What add stores is what its parser approved, by construction: after
// every chunk is hashed and stored, the bytes the codec read while it
// parsed are read again from a Dir that serves exactly the stored bytes
// (each chunk read is hashed and must be the chunk digest recorded, so it
// is the blob in the store), and they must be the bytes it parsed
// (readLog). The parse being a function of what it read, the stored bytes
// parse to the layout the add records. A file rewritten between the first
// parse and the hashing (even at the same size, with its mtime set back)
// is refused, however the rewrite was made; so is one rewritten after.
//
// Compressed files (MPK) are read twice too, by the parser and by the
// decoder that spools their stream; both reads are hashed (recordingDir)
// and must be equal, so the stream stored is the stream parsed.

// verifyStored checks that what was stored is what the codec parsed into
// layout: the answers the parse got (log) are asked again of the stored
// bytes. When one differs, the stored bytes are parsed again, to refuse
// them with the codec's reason, or to accept them when they still parse to
// layout (an answer the codec does not depend on). A model whose container
// files are all decoded streams is not checked here (spool checks them).
func verifyStored(codec formats.Codec, claimed []string, layout *formats.Layout, files []fileWork, h *hashes, pool *readerPool, log *readLog) error {
	decoded := 0
	for _, f := range layout.Files {
		if f.Meta[formats.MetaCompression] != "" {
			decoded++
		}
	}
	switch {
	case decoded == len(layout.Files):
		return nil // the stream was checked when it was spooled (spool)
	case decoded > 0:
		return fmt.Errorf("add: codec %s lays out compressed and plain container files together; add cannot check them", codec.Name())
	}
	sd := newStagedDir(files, h, pool)
	same := log.replay(sd)
	if verr := sd.failure(); verr != nil {
		return verr
	}
	if same {
		return nil
	}
	again, err := codec.Parse(sd, claimed)
	if verr := sd.failure(); verr != nil {
		return verr
	}
	if err != nil {
		return errs.Wrap(errs.IntegrityError, "add", err, "the model's bytes as stored no longer parse as they did: a file changed while it was being added; add it again when nothing writes to it")
	}
	if !reflect.DeepEqual(layout, again) {
		return errs.New(errs.IntegrityError, "add", "the model's bytes as stored parse to another layout: a file changed while it was being added; add it again when nothing writes to it")
	}
	return nil
}

// stagedDir is a formats.Dir of the model as it was stored: each file's
// extents, frames and tensor data served chunk by chunk from the source
// file after the chunk has been hashed and found to be the stored blob,
// zero padding as zeros. Only what the parser reads is read (headers,
// mostly), a chunk at a time, the last few kept.
type stagedDir struct {
	files map[string]*stagedFile
	pool  *readerPool
	links formats.LinkCounter

	mu    sync.Mutex
	err   error // the first verification failure
	cache []*verifiedChunk
}

type stagedFile struct {
	path   string
	size   int64
	pieces []stagedPiece // in file order, tiling [0, size)
}

type stagedPiece struct {
	off, size int64
	zeros     bool
	chunks    []objects.Digest
}

type verifiedChunk struct {
	path  string
	off   int64 // in the file
	bytes []byte
}

// stagedCacheChunks is how many verified chunks a stagedDir keeps (at most
// objects.ChunkSize bytes each).
const stagedCacheChunks = 4

func newStagedDir(files []fileWork, h *hashes, pool *readerPool) *stagedDir {
	d := &stagedDir{files: map[string]*stagedFile{}, pool: pool}
	if lc, ok := any(pool.dir.Dir).(formats.LinkCounter); ok {
		d.links = lc
	}
	for fi, f := range files {
		sf := &stagedFile{path: f.Path, size: f.Size, pieces: make([]stagedPiece, 0, len(f.Extents))}
		for ei, e := range f.Extents {
			p := stagedPiece{off: e.Offset, size: e.Size}
			switch e.Kind {
			case formats.Zeros:
				p.zeros = true
			case formats.Frame:
				p.chunks = h.frames[[2]int{fi, ei}].chunks
			case formats.TensorData:
				p.chunks = h.tensors[e.Tensor].chunks
			}
			sf.pieces = append(sf.pieces, p)
		}
		d.files[f.Path] = sf
	}
	return d
}

func (d *stagedDir) Stat(p string) (int64, error) {
	f, ok := d.files[p]
	if !ok {
		return 0, errs.New(errs.NotFound, "add", "%s is not among the files that were added", p)
	}
	return f.size, nil
}

func (d *stagedDir) Open(p string) (formats.ReadAtCloser, error) {
	f, ok := d.files[p]
	if !ok {
		return nil, errs.New(errs.NotFound, "add", "%s is not among the files that were added", p)
	}
	return &stagedReader{d: d, f: f}, nil
}

// DefersCRC32: as the first parse's Dir (readLog), so that the same reads
// give the same layout.
func (d *stagedDir) DefersCRC32() bool { return true }

// Links implements formats.LinkCounter for codecs that ask (ONNX).
func (d *stagedDir) Links(p string) (int, error) {
	if d.links == nil {
		return 1, nil
	}
	return d.links.Links(p)
}

func (d *stagedDir) failure() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

func (d *stagedDir) fail(err error) error {
	if d.err == nil {
		d.err = err
	}
	return err
}

// chunk returns chunk i of piece pc of f, read from the source and checked
// against the digest that was stored; d.mu is held.
func (d *stagedDir) chunk(f *stagedFile, pc *stagedPiece, i int) ([]byte, error) {
	rel, n := objects.ChunkBounds(pc.size, i)
	off := pc.off + rel
	for j, c := range d.cache {
		if c.path == f.path && c.off == off {
			d.cache = append(append(d.cache[:j:j], d.cache[j+1:]...), c) // most recent last
			return c.bytes, nil
		}
	}
	var buf []byte
	if len(d.cache) == stagedCacheChunks {
		buf = d.cache[0].bytes[:0]
		d.cache = d.cache[1:]
	}
	if int64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if err := d.readChunk(f, pc, i, buf); err != nil {
		return nil, err
	}
	d.cache = append(d.cache, &verifiedChunk{path: f.path, off: off, bytes: buf})
	return buf, nil
}

// readChunk reads chunk i of piece pc of f into buf (its length) and
// checks it against the digest that was stored; d.mu is held.
func (d *stagedDir) readChunk(f *stagedFile, pc *stagedPiece, i int, buf []byte) error {
	rel, _ := objects.ChunkBounds(pc.size, i)
	return d.readChunks(f, []wholeChunk{{pc, i}}, buf, pc.off+rel)
}

// wholeChunk is chunk i of piece pc.
type wholeChunk struct {
	pc *stagedPiece
	i  int
}

// readChunks reads run, chunks that lie one after another from off, into
// buf (their length exactly: both callers cut it so) with one read, and checks each against the digest
// that was stored; d.mu is held. A checkpoint of 100,000 zip members read
// back a chunk at a time was 400,000 reads of a few hundred bytes.
func (d *stagedDir) readChunks(f *stagedFile, run []wholeChunk, buf []byte, off int64) error {
	r, release, err := d.pool.acquire(f.path)
	if err != nil {
		return d.fail(err)
	}
	defer release()
	if _, err := r.ReadAt(buf, off); err != nil {
		return d.fail(errChanged(f.path, fmt.Sprintf("%d bytes at %d can no longer be read: %v", len(buf), off, err)))
	}
	// Hashed eight at a time (SumSmall): a run is mostly a zip's member
	// headers, of a few hundred bytes each.
	msgs := make([][]byte, len(run))
	at := int64(0)
	for k, c := range run {
		_, n := objects.ChunkBounds(c.pc.size, c.i)
		msgs[k] = buf[at : at+n]
		at += n
	}
	sums := make([]objects.Digest, len(run))
	objects.SumSmall(msgs, sums)
	at = 0
	for k, c := range run {
		if sums[k] != c.pc.chunks[c.i] {
			return d.fail(errChanged(f.path, fmt.Sprintf("the %d bytes at %d are not the ones stored", len(msgs[k]), off+at)))
		}
		at += int64(len(msgs[k]))
	}
	return nil
}

type stagedReader struct {
	d *stagedDir
	f *stagedFile
}

func (r *stagedReader) Size() int64  { return r.f.size }
func (r *stagedReader) Close() error { return nil }

func (r *stagedReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("add: negative offset")
	}
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	if r.d.err != nil {
		return 0, r.d.err
	}
	f := r.f
	n := 0
	// Whole chunks, one after another, are read with one read into p
	// (p[runAt:n], from runOff) and each verified there, not cached: a
	// header of many megabytes (100,000 tensors) is not held twice while
	// it is read again.
	var run []wholeChunk
	runAt, runOff := 0, int64(0)
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		err := r.d.readChunks(f, run, p[runAt:n], runOff)
		run = run[:0]
		return err
	}
	for n < len(p) && off < f.size {
		k := sort.Search(len(f.pieces), func(k int) bool { return f.pieces[k].off+f.pieces[k].size > off })
		pc := &f.pieces[k]
		in := off - pc.off
		if !pc.zeros {
			i := int(in / objects.ChunkSize)
			if rel, size := objects.ChunkBounds(pc.size, i); in == rel && int64(len(p)-n) >= size {
				if len(run) == 0 {
					runAt, runOff = n, off
				}
				run = append(run, wholeChunk{pc, i})
				n += int(size)
				off += size
				continue
			}
		}
		if err := flush(); err != nil {
			return runAt, err
		}
		var src []byte
		if pc.zeros {
			src = make([]byte, min(pc.size-in, int64(len(p)-n)))
		} else {
			i := int(in / objects.ChunkSize)
			b, err := r.d.chunk(f, pc, i)
			if err != nil {
				return n, err
			}
			src = b[in-int64(i)*objects.ChunkSize:]
		}
		c := copy(p[n:], src)
		n += c
		off += int64(c)
	}
	if err := flush(); err != nil {
		return runAt, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// recordingDir hashes what a codec reads of each file, when it reads the
// file in one pass from its start (as a decompressor does).
type recordingDir struct {
	formats.Dir
	// complete makes Close read what the codec left of a file, so that
	// its digest covers it all (for a decoder, which may stop at the end
	// of its stream).
	complete bool
	mu       sync.Mutex
	reads    map[string]*recording
}

type recording struct {
	path       string
	size, next int64
	hash       *objects.Hasher
	broken     bool // read out of order
}

func newRecordingDir(dir formats.Dir) *recordingDir {
	return &recordingDir{Dir: dir, reads: map[string]*recording{}}
}

func (d *recordingDir) Open(p string) (formats.ReadAtCloser, error) {
	f, err := d.Dir.Open(p)
	if err != nil {
		return nil, err
	}
	rec := &recording{path: p, size: f.Size(), hash: objects.NewHasher()}
	d.mu.Lock()
	if d.reads[p] != nil {
		rec.broken = true // opened twice: two reads to tell apart
	}
	d.reads[p] = rec
	d.mu.Unlock()
	return &recordingFile{ReadAtCloser: f, rec: rec, complete: d.complete}, nil
}

// digest returns the digest of the whole file at p as it was read, or
// false when it was not read whole, in one pass.
func (d *recordingDir) digest(p string) (objects.Digest, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	rec := d.reads[p]
	if rec == nil || rec.broken || rec.next != rec.size {
		return objects.Digest{}, false
	}
	return rec.hash.Digest(), true
}

type recordingFile struct {
	formats.ReadAtCloser
	mu       sync.Mutex
	rec      *recording
	complete bool
}

func (f *recordingFile) Close() error {
	var err error
	if f.complete {
		err = f.finish()
	}
	if cerr := f.ReadAtCloser.Close(); err == nil {
		err = cerr
	}
	return err
}

func (f *recordingFile) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.ReadAtCloser.ReadAt(p, off)
	if off != f.rec.next {
		f.rec.broken = f.rec.broken || n > 0
		return n, err
	}
	f.rec.hash.Write(p[:n])
	f.rec.next += int64(n)
	return n, err
}

// finish reads whatever the codec left unread of the file, in order, so
// that its digest covers the whole file.
func (f *recordingFile) finish() error {
	buf := make([]byte, 64<<10)
	for !f.rec.broken && f.rec.next < f.rec.size {
		n := min(int64(len(buf)), f.rec.size-f.rec.next)
		if _, err := f.ReadAt(buf[:n], f.rec.next); err != nil {
			return err
		}
	}
	return nil
}
