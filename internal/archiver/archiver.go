// Package archiver adds a model to a store: it finds the model's container
// format, lets the codec cut each file into frames and tensors, hashes and
// stores every chunk in parallel, and commits the manifest and the ref in
// one short index transaction at the end.
//
// What is stored is what the codec approved (verify.go): what the codec
// read is read again from the stored bytes and must be what it parsed
// before anything is committed, and a file whose size, times, inode or
// device change during the add fails it.
// Files are opened when a worker needs them and closed after (pool.go).
package archiver

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/codecs"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/gcpace"
	"github.com/mstore/mstore/internal/modeldir"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/progress"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
)

// Options say how to add a model.
type Options struct {
	Name    string   // the ref to move; defaults to the path's base name
	Tag     string   // an optional tag to create at the new version
	Tags    []string // more tags to create at it (add --tag given several times)
	Message string
	// Workers bounds the chunks hashed and written at once; zero means one
	// more than the number of CPUs.
	Workers  int
	Progress progress.Reporter
	// Limits bound what codecs that take limits (MPK) accept.
	Limits formats.Limits
	// Now stamps the history entry; zero means time.Now.
	Now func() time.Time
	// Files, when set, are the model's files: each model path and the file
	// under the add's path (then a directory) it is read from
	// (modeldir.OpenFiles). A layout (internal/layouts) sets it.
	Files map[string]string
	// Meta is recorded in the manifest (objects.Manifest.Meta): where the
	// model came from, as a layout read it.
	Meta map[string]string
}

// Result describes what an add did.
type Result struct {
	Name         string         `json:"name"`
	Tag          string         `json:"tag,omitempty"`  // the first tag
	Tags         []string       `json:"tags,omitempty"` // every tag created, when several
	Digest       objects.Digest `json:"digest"`
	Format       string         `json:"format"`
	Files        int            `json:"files"`
	Tensors      int            `json:"tensors"`
	LogicalBytes int64          `json:"logical_bytes"`
	NewBytes     int64          `json:"new_bytes"`
	NewBlobs     int            `json:"new_blobs"`
	Moved        bool           `json:"moved"` // false when the ref already pointed here
	Warnings     []string       `json:"warnings"`
}

// Add stores the model at path (a file or a model directory) in st.
func Add(ctx context.Context, st *store.Store, path string, opts Options) (*Result, error) {
	if opts.Name == "" {
		opts.Name = DefaultName(path)
	}
	if _, err := refs.ParseName(opts.Name); err != nil {
		return nil, err
	}
	for _, t := range opts.allTags() {
		if _, err := refs.ParseTag(t); err != nil {
			return nil, err
		}
	}
	dir, err := openModel(path, opts.Files)
	if err != nil {
		return nil, err
	}
	defer dir.Close()

	codec, claimed, err := chooseCodec(dir, path)
	if err != nil {
		return nil, err
	}
	if lc, ok := codec.(formats.Limited); ok {
		codec = lc.WithLimits(opts.Limits)
	}
	// Every file's state is taken before anything is read: a file that
	// changes from here to the commit fails the add.
	before, err := statAll(dir)
	if err != nil {
		return nil, err
	}
	src := checkedDir{Dir: dir, before: before}
	// The parse builds the layout, which the add keeps: the headers of
	// 19,500 tensors took three collections at the default target, one
	// at gcpace's.
	parsing := gcpace.Raise()
	layout, parsed, log, err := parse(codec, src, claimed)
	parsing()
	if err != nil {
		return nil, err
	}
	store.Failpoint(store.FailAddParsed)
	formatWarnings := otherFormatFiles(dir, codec, layout)
	files, err := withOtherFiles(dir, layout, claimed)
	if err != nil {
		return nil, err
	}

	// gc waits while an add holds the store's lock (shared): it never
	// deletes a blob this add found in the store or wrote and has not yet
	// recorded.
	lock, err := st.Lock(store.LockShared, 0)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	known, err := st.KnownBlobs()
	if err != nil {
		return nil, err
	}
	w := st.NewBlobWriter(known)
	defer w.Abort()
	w.Expect(len(layout.Tensors) + len(files)) // a blob each, unless shared
	// Nothing reads the blobs back soon: past the page cache
	// (TestAddWritesLargeBlobsUncached).
	w.WriteUncached()
	decoded, err := decoders(codec, src, layout, st, parsed)
	if err != nil {
		return nil, err
	}
	pool := newReaderPool(src, decoded)
	defer pool.close()
	h, err := hashAndStore(ctx, pool, layout, files, w, opts)
	if err != nil {
		return nil, err
	}
	w.SyncAhead()   // the disk flushes the blobs while the manifest is built
	w.ForgetKnown() // the snapshot of the store's digests is not held through the commit
	large := len(layout.Tensors) >= largeModel
	collect(large) // what the hashing left, before the manifest is built
	// The manifest is built on another core while the stored bytes are
	// verified (each 15-20 ms for a model of 100,000 tensors, and one
	// core each): both only read the layout and the hashes. A manifest
	// whose model fails the check is dropped unused.
	built := make(chan *objects.Manifest, 1)
	go func() { built <- h.manifest(layout, files) }()
	verr := verifyStored(codec, claimed, layout, files, h, pool, log)
	m := <-built
	if verr != nil {
		return nil, verr
	}
	if err := checkUnchanged(dir, files, before); err != nil {
		return nil, err
	}
	m.Meta = opts.Meta
	format, configJSON := layout.Format, h.configJSON
	// Each stage of the commit keeps only what the next needs: the model's
	// layout and hashes are dropped once the manifest is built, the
	// manifest once it is encoded. A model of 100,000 tensors holds each
	// of them at about 15 MB, the encoding at 30 MB.
	layout, h, files = nil, nil, nil
	collect(large)
	// What the version needs (100,000 digests to sort for a model of as
	// many small tensors, 15-40 ms) is listed on another goroutine while
	// the manifest is encoded, not after.
	blobs := make(chan []objects.Digest, 1)
	go func(m *objects.Manifest) { blobs <- m.Blobs() }(m)
	digest, encoded, err := m.Digest()
	if err != nil {
		return nil, err
	}
	// The manifest is read back while its blob is written and the blobs
	// are made durable (Commit waits on the disk): the store must never
	// hold a manifest it cannot read, and nothing is recorded before the
	// read-back has passed. (A read-back that fails is a fault of this
	// build, never of the input; the blob files it leaves unrecorded are
	// what a crash leaves, and gc removes them.)
	var readBackErr error
	readBack := make(chan struct{})
	go func() { readBackErr = checkReadBack(encoded); close(readBack) }()
	defer func() { <-readBack }() // an early return waits: encoded is read until then
	// The manifest is a blob too: the copy `fsck --rebuild-index` reads.
	// Its file (28 MB for 100,000 tensors) is written while the rest is
	// made ready; only Commit publishes it, after the checks below.
	var putErr error
	put := make(chan struct{})
	go func() { _, putErr = w.Put(digest, encoded); close(put) }()
	defer func() { <-put }() // before Abort: its temp file is the writer's to remove
	res := &Result{Name: opts.Name, Tag: opts.Tag, Digest: digest, Format: format,
		Files: len(m.Files), Tensors: len(m.Tensors), LogicalBytes: m.LogicalBytes(), Warnings: append([]string{}, formatWarnings...)}
	if warn := DTypeMismatch(configJSON, m.Tensors); warn != "" {
		res.Warnings = append(res.Warnings, warn)
	}
	needs := <-blobs
	m = nil
	collect(large)
	if err := checkTagFree(st, opts, digest); err != nil {
		return nil, err // before any blob is published: a refused add leaves nothing
	}
	if <-put; putErr != nil {
		return nil, putErr
	}
	written, err := w.Commit()
	if err != nil {
		return nil, err
	}
	if <-readBack; readBackErr != nil {
		return nil, readBackErr
	}
	// The manifest's bytes are written and read back: a store that keeps
	// stubs needs no more of them. Held through the record batches below,
	// the 28 MB of a model of 100,000 tensors were a third of what an add
	// into a store of 1.6 million blobs had live, whose batches make tens
	// of megabytes of garbage each.
	manifestSize := int64(len(encoded))
	stubs, err := st.KeepsStubs()
	if err != nil {
		return nil, err
	}
	if stubs {
		encoded = nil
	}
	collect(large) // the read-back's manifest, and the bytes
	if all := opts.allTags(); len(all) > 0 {
		res.Tag = all[0]
		if len(all) > 1 {
			res.Tags = all
		}
	}
	for _, r := range written {
		res.NewBytes += r.Size
		res.NewBlobs++
	}
	// What the commit checks is still recorded is what the store had when
	// the add began: the blobs this add wrote it records itself, under its
	// lock (100,000 look-ups fewer in the version's transaction).
	needs = notWritten(needs, written)
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	// The blobs of a large model are recorded in bounded batches first;
	// the last batch goes with the version, and so does the manifest's
	// blob.
	if written, err = st.RecordAhead(written, store.FailAddBlobsRecorded); err != nil {
		return nil, err
	}
	collect(large)
	err = st.Update(func(tx *bolt.Tx) error {
		if err := store.RecordBlobs(tx, written); err != nil {
			return err
		}
		// Blobs the store had when the add began must still be there: a
		// version is committed only with everything it needs.
		if err := store.RequireRecorded(tx, needs); err != nil {
			return errs.Wrap(errs.IntegrityError, "add", err, "a blob this version needs left the store while it was being added; add it again")
		}
		var manifestErr error
		if encoded == nil {
			manifestErr = store.PutManifestStub(tx, digest, manifestSize, res.LogicalBytes)
		} else {
			manifestErr = store.PutManifestOf(tx, digest, encoded, res.LogicalBytes)
		}
		if manifestErr != nil {
			return manifestErr
		}
		cur, err := refs.Current(tx, opts.Name)
		if err != nil && errs.ClassOf(err) != errs.NotFound {
			return err
		}
		if err != nil || cur != digest {
			msg := opts.Message
			if msg == "" {
				msg = "add " + filepath.Base(path)
			}
			if _, err := refs.Move(tx, opts.Name, digest, msg, now().UTC()); err != nil {
				return err
			}
			res.Moved = true
		}
		for _, t := range opts.allTags() {
			if _, err := refs.Tag(tx, opts.Name, t, digest); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// notWritten returns, in place, the digests of needs that no record of
// written names. Both are in key order (Manifest.Blobs, BlobWriter.Commit);
// were written not, a digest would only be kept that could go.
func notWritten(needs []objects.Digest, written []store.BlobRecord) []objects.Digest {
	out, j := needs[:0], 0
	for _, d := range needs {
		for j < len(written) && bytes.Compare(written[j].Digest[:], d[:]) < 0 {
			j++
		}
		if j < len(written) && written[j].Digest == d {
			continue
		}
		out = append(out, d)
	}
	return out
}

// checkReadBack is objects.CheckReadBack; a test makes it fail.
var checkReadBack = objects.CheckReadBack

func openModel(path string, files map[string]string) (*modeldir.Dir, error) {
	if files != nil {
		return modeldir.OpenFiles(path, files)
	}
	return modeldir.Open(path)
}

// parse lets the codec lay out the claimed files, through a readLog of
// what it read (verifyStored checks it against what is stored). A codec
// that decodes what it parses (MPK) reads through a recordingDir too,
// whose digests the spooled streams are checked against (spool).
func parse(codec formats.Codec, dir formats.Dir, claimed []string) (*formats.Layout, *recordingDir, *readLog, error) {
	log := newReadLog(dir)
	dir = log
	var rec *recordingDir
	if _, ok := codec.(formats.Decoder); ok {
		rec = newRecordingDir(dir)
		dir = rec
	}
	l, err := codec.Parse(dir, claimed)
	return l, rec, log, err
}

// checkTagFree refuses, before anything is written, a --tag that already
// names another version. (The commit checks again, inside its transaction.)
func checkTagFree(st *store.Store, opts Options, d objects.Digest) error {
	return st.View(func(tx *bolt.Tx) error {
		for _, t := range opts.allTags() {
			spec := refs.Spec{Kind: refs.KindTag, Name: opts.Name, Tag: t}
			cur, err := refs.Resolve(tx, spec, store.ManifestIndex{Tx: tx})
			if errs.ClassOf(err) == errs.NotFound {
				continue
			}
			if err != nil {
				return err
			}
			if cur != d {
				return errs.New(errs.Conflict, "add", "tag %s:%s already names %s; tags never move (choose another tag)", opts.Name, t, cur.Short())
			}
		}
		return nil
	})
}

// allTags is Tag and Tags, in order.
func (o Options) allTags() []string {
	var all []string
	if o.Tag != "" {
		all = append(all, o.Tag)
	}
	return append(all, o.Tags...)
}

// DefaultName is the ref name an add uses without --name: the base name of
// the path, without a container extension (codecs.Extensions).
func DefaultName(path string) string {
	base := filepath.Base(filepath.Clean(path))
	for _, ext := range codecs.Extensions() {
		if strings.HasSuffix(strings.ToLower(base), ext) && len(base) > len(ext) {
			return base[:len(base)-len(ext)]
		}
	}
	return base
}

// refusedKinds are files that look like models but that mstore will not take,
// with the reason a user is given.
var refusedKinds = map[string]string{
	".h5":     "Keras HDF5 models can run code when loaded (Lambda layers) and hold no plain tensor container; export the weights to SafeTensors first",
	".keras":  "Keras .keras archives can run code when loaded (Lambda layers); export the weights to SafeTensors first",
	".engine": "TensorRT engines are compiled for one GPU model and TensorRT version and are not portable weights; store the ONNX model they are built from",
	".plan":   "TensorRT plans are compiled for one GPU model and TensorRT version and are not portable weights; store the ONNX model they are built from",
	".jit":    "this is a TorchScript archive (torch.jit.save): its code/ folder holds code that runs when it is loaded, so mstore does not take it; save the model's state_dict() with torch.save instead",
}

// chooseCodec picks the model's format: the first codec, in the registry's
// order, that claims one of its files. Files of other formats beside it are
// kept as opaque files, with a warning (otherFormatFiles).
func chooseCodec(dir *modeldir.Dir, path string) (formats.Codec, []string, error) {
	if len(dir.Files) == 1 {
		if why, ok := refusedKinds[modeldir.Ext(dir.Files[0])]; ok {
			return nil, nil, errs.New(errs.UnsupportedVersion, "add", "%s: %s", path, why)
		}
	}
	for _, c := range codecs.All() {
		if files := dir.SortedFiles(claimsOf(c, dir)); len(files) > 0 {
			return c, files, nil
		}
	}
	if dir.Single {
		return nil, nil, errs.New(errs.UnsupportedVersion, "add",
			"%s is not a model container this build takes (%s)", path, codecs.Describe())
	}
	// A directory without a model is a model not found (not_found), as an
	// empty directory most often is a wrong path, not an unknown format.
	looked := codecs.Extensions()
	for i, ext := range looked {
		looked[i] = "*" + ext
	}
	what := "it is empty"
	switch n := len(dir.Files); {
	case n == 1:
		what = "it holds one other file"
	case n > 1:
		what = fmt.Sprintf("it holds %d other files", n)
	}
	return nil, nil, errs.New(errs.NotFound, "add",
		"no model found in %s (%s; looked for %s)", path, what, strings.Join(looked, ", "))
}

// claimsOf is what c claims of this model: inside a directory, a codec
// that says so claims less than of a file given alone.
func claimsOf(c formats.Codec, dir *modeldir.Dir) func(string) bool {
	if dc, ok := c.(formats.DirClaimer); ok && !dir.Single {
		return dc.ClaimsInDir
	}
	return c.Claims
}

// otherFormatFiles lists, as warnings, the files of the model that another
// codec claims but the chosen one left out of its layout (a Hugging Face
// repo often ships pytorch_model.bin or an onnx/ export beside its
// SafeTensors weights). They are kept as opaque files: never parsed, so
// never run, but their tensors are not shared with other versions.
func otherFormatFiles(dir *modeldir.Dir, chosen formats.Codec, l *formats.Layout) []string {
	taken := map[string]bool{}
	for _, f := range l.Files {
		taken[f.Path] = true
	}
	var warnings []string
	for _, c := range codecs.All() {
		if c.Name() == chosen.Name() {
			continue
		}
		for _, f := range dir.SortedFiles(claimsOf(c, dir)) {
			if !taken[f] {
				warnings = append(warnings, fmt.Sprintf("%s is a %s file; it is kept as an opaque file beside the %s model (not parsed, its tensors not shared with other versions); add it on its own to store it per tensor",
					f, c.Name(), chosen.Name()))
			}
		}
	}
	return warnings
}

// fileWork is one file of the model: its layout and where its bytes come from.
type fileWork struct {
	formats.File
	other  bool   // not a container file: kept byte for byte
	format string // the codec's, whose refusals the add makes for it (CRC32Checks)
}

// withOtherFiles returns every file of the model in path order: the codec's
// files and, beside them, the directory's other files as single frames.
func withOtherFiles(dir *modeldir.Dir, l *formats.Layout, claimed []string) ([]fileWork, error) {
	var out []fileWork
	inLayout := map[string]bool{}
	for _, f := range l.Files {
		if err := checkCoverage(f, l.Tensors); err != nil {
			return nil, err
		}
		inLayout[f.Path] = true
		out = append(out, fileWork{File: f, format: l.Format})
	}
	for _, p := range claimed {
		if !inLayout[p] {
			return nil, fmt.Errorf("add: codec %s left %s out of its layout", l.Format, p)
		}
	}
	for _, p := range dir.Files {
		if inLayout[p] {
			continue
		}
		size, err := dir.Stat(p)
		if err != nil {
			return nil, err
		}
		f := formats.File{Path: p, Size: size}
		if size > 0 {
			f.Extents = []formats.Extent{{Kind: formats.Frame, Size: size}}
		}
		out = append(out, fileWork{File: f, other: true})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// checkCoverage makes sure a codec's extents tile the file exactly, and
// that each tensor extent is one whole tensor (formattest.CheckLayout's
// rule too).
func checkCoverage(f formats.File, tensors []formats.Tensor) error {
	var off int64
	for _, e := range f.Extents {
		if e.Offset != off || e.Size < 0 || e.Kind == formats.TensorData && (e.Tensor < 0 || e.Tensor >= len(tensors) || e.Size != tensors[e.Tensor].Size) {
			return fmt.Errorf("add: codec layout of %s is inconsistent at byte %d", f.Path, off)
		}
		off += e.Size
	}
	if off != f.Size {
		return fmt.Errorf("add: codec layout of %s covers %d of %d bytes", f.Path, off, f.Size)
	}
	var end int64 // the CRC-32 runs the add compares (crcRuns): in order, apart, inside the file
	for _, c := range f.CRC32Checks {
		if c.Offset < end || c.Size < 0 || c.Offset+c.Size > f.Size {
			return fmt.Errorf("add: codec layout of %s: a CRC-32 run at byte %d (%d bytes) is out of order or outside the file", f.Path, c.Offset, c.Size)
		}
		end = c.Offset + c.Size
	}
	return nil
}

// largeModel is the number of tensors from which add collects garbage
// itself where a stage drops what it held (collect).
const largeModel = 10_000

// collect runs a garbage collection now, for a large model: where a stage
// of add has just dropped tens of megabytes (a layout, the hashes, a
// manifest) and the next is about to allocate as much, so that the heap
// is reused instead of grown to twice what was live at the last
// collection. For 100,000 tensors each costs about 10 ms and keeps the
// peak 30–40 MB lower.
func collect(large bool) {
	if large {
		runtime.GC()
	}
}

func workers(n int) int {
	if n > 0 {
		return n
	}
	return runtime.NumCPU() + 1
}

// counter adds to a Progress, if there is one.
type counter struct {
	p    progress.Reporter
	done atomic.Int64
}

func (c *counter) add(n int64) {
	c.done.Add(n)
	if c.p != nil {
		c.p.Add(n)
	}
}
