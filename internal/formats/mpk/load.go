package mpk

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

// Load reads an MPK archive (a gzip-compressed tar stream) from r in one
// pass, enforcing every rule of the contract as it goes: limits before
// anything they bound is read, entry names and types at each header, JSON
// as each JSON member is read, required contents at the end. It stops at
// the first failure with exactly one class (see the package doc).
func Load(r io.Reader, opts Options) (*Archive, error) {
	if opts.Name != "" {
		if err := CheckName(opts.Name); err != nil {
			return nil, err
		}
	}
	l := &loader{lim: Limits(opts.Limits), name: opts.Name, landed: map[string]string{}, a: &Archive{}}
	if l.name == "" {
		l.name = "archive"
	}
	l.budget = opts.Limits.Budget(pkg, l.name, 0)
	if err := l.run(r); err != nil {
		return nil, err
	}
	return l.a, nil
}

// errLimit is what a counter returns past its limit; the loader reports it
// as size_limit_exceeded whatever the reader above made of it.
var errLimit = errors.New("mpk: limit reached")

// counter counts the bytes read through it and fails past limit.
type counter struct {
	r     io.Reader
	n     int64
	limit int64
	over  bool
}

func (c *counter) Read(p []byte) (int, error) {
	if c.over {
		return 0, errLimit
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.limit {
		c.over = true
		return n, errLimit
	}
	return n, err
}

type loader struct {
	lim    Bounds
	name   string
	comp   *counter // the compressed file
	dec    *counter // the tar stream
	tr     *tar.Reader
	a      *Archive
	landed map[string]string // foldKey(target) → member name
	// entries counts tar entries; frameStart is where the frame being
	// built began (the end of the last member's content); blockEnd is the
	// end of the last entry's blocks (headers, content and padding).
	entries    int64
	frameStart int64
	blockEnd   int64
	binaries   int
	pipeline   bool
	// budget is charged for the members and JSON values kept; it grows
	// with the decompressed bytes read.
	budget *formats.Budget
}

// charge records n bytes built from the stream read so far.
func (l *loader) charge(n int64) error {
	l.budget.ReadTo(l.dec.n)
	return l.budget.Charge(n)
}

func (l *loader) run(r io.Reader) error {
	l.comp = &counter{r: r, limit: l.lim.MaxArchiveBytes}
	blake, sha := objects.NewHasher(), sha256.New()
	compressed := io.TeeReader(l.comp, io.MultiWriter(blake, sha))
	zr, err := gzip.NewReader(compressed)
	if err != nil {
		return l.streamErr(err, 0, "not a gzip stream")
	}
	l.dec = &counter{r: zr, limit: l.lim.MaxArchiveBytes}
	l.tr = tar.NewReader(l.dec)
	for {
		h, err := l.tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return l.streamErr(err, l.blockEnd, "tar stream")
		}
		if err := l.entry(h); err != nil {
			return err
		}
	}
	if err := l.end(); err != nil {
		return err
	}
	// gzip has read its input to the end (it looks for another member);
	// whatever bytes are left are hashed too.
	if _, err := io.Copy(io.Discard, compressed); err != nil {
		return l.streamErr(err, l.dec.n, "read the archive")
	}
	l.a.Size, l.a.Digest, l.a.SHA256 = l.comp.n, blake.Digest(), hex.EncodeToString(sha.Sum(nil))
	return l.required()
}

// streamErr classifies a failure to read the stream: past a limit,
// size_limit_exceeded; anything else (corrupt gzip, a bad tar header or
// checksum, a truncated stream) invalid_archive.
func (l *loader) streamErr(err error, at int64, what string) error {
	switch {
	case l.comp.over:
		return errs.New(errs.SizeLimitExceeded, pkg, "%s: the archive is larger than max_archive_bytes (%d)", l.name, l.lim.MaxArchiveBytes)
	case l.dec != nil && l.dec.over:
		return errs.New(errs.SizeLimitExceeded, pkg, "%s: the archive decompresses to more than max_archive_bytes (%d) (a gzip bomb?)", l.name, l.lim.MaxArchiveBytes)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		err = errors.New("the stream is truncated")
	}
	return errs.At(errs.InvalidArchive, pkg, l.name, at, "%s: %v", what, err)
}

// fail refuses the entry whose headers begin at the current blockEnd.
func (l *loader) fail(class errs.Class, format string, args ...any) error {
	return errs.At(class, pkg, l.name, l.blockEnd, format, args...)
}

// reclass puts the archive's name and the entry's offset on an error of
// this package.
func (l *loader) reclass(err error) error {
	var e *errs.Error
	if errors.As(err, &e) && e.Path == "" {
		return errs.At(e.Class, pkg, l.name, l.blockEnd, "%s", e.Msg)
	}
	return err
}

// entry checks one tar entry and reads its content.
func (l *loader) entry(h *tar.Header) error {
	l.entries++
	if l.entries > l.lim.MaxEntries {
		return l.fail(errs.SizeLimitExceeded, "more than max_entries (%d) entries", l.lim.MaxEntries)
	}
	start := l.dec.n // Next has read every header of the entry
	switch h.Typeflag {
	case tar.TypeSymlink, tar.TypeLink:
		return l.fail(errs.PathTraversal, "entry %q is a link (to %q); links are refused", h.Name, h.Linkname)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return l.fail(errs.InvalidArchive, "entry %q is a device or FIFO (type %q); only regular files and directories are accepted", h.Name, h.Typeflag)
	case tar.TypeReg, tar.TypeDir:
	default:
		return l.fail(errs.InvalidArchive, "entry %q has type %q; only regular files and directories are accepted", h.Name, h.Typeflag)
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return l.fail(errs.InvalidArchive, "entry %q is a sparse file; only regular files are accepted", h.Name)
		}
	}
	name, err := memberName(h.Name, h.Typeflag == tar.TypeDir)
	if err != nil {
		return l.reclass(err)
	}
	if h.Typeflag == tar.TypeDir { // checked, then ignored
		if h.Size != 0 {
			return l.fail(errs.InvalidArchive, "directory entry %q declares %d bytes of content", h.Name, h.Size)
		}
		l.blockEnd = start
		return nil
	}
	if h.Size > l.lim.MaxEntryBytes {
		return l.fail(errs.SizeLimitExceeded, "entry %q is %d bytes, more than max_entry_bytes (%d)", name, h.Size, l.lim.MaxEntryBytes)
	}
	target, err := Target(name)
	if err != nil {
		return l.reclass(err)
	}
	if other, dup := l.landed[foldKey(target)]; dup {
		return l.fail(errs.InvalidArchive, "entries %q and %q would both be extracted to %s (paths that differ only in case or Unicode normalisation count as the same)", other, name, target)
	}
	l.landed[foldKey(target)] = name

	// The member, its name and target (here, in landed, in the manifest)
	// and its extents.
	if err := l.charge(3*int64(len(name)+len(target)) + 400); err != nil {
		return err
	}
	m := Member{Name: name, Target: target, Offset: start, Size: h.Size}
	l.frame(start)
	l.a.Extents = append(l.a.Extents, formats.Extent{Kind: formats.TensorData, Offset: start, Size: h.Size, Tensor: len(l.a.Members)})
	l.a.Members = append(l.a.Members, m)
	l.frameStart = start + h.Size
	l.blockEnd = start + (h.Size+511)/512*512

	if strings.HasSuffix(target, ".json") {
		return l.jsonMember(m, start)
	}
	l.binaries++
	return l.copyContent(m, start)
}

// frame adds the frame from frameStart to end, if it is not empty.
func (l *loader) frame(end int64) {
	if end > l.frameStart {
		l.a.Extents = append(l.a.Extents, formats.Extent{Kind: formats.Frame, Offset: l.frameStart, Size: end - l.frameStart})
	}
}

// jsonMember reads a JSON member into memory, checks it (and, for the
// contract and the pipeline, their fields), then extracts it.
func (l *loader) jsonMember(m Member, start int64) error {
	if m.Size > MaxJSONBytes {
		return l.fail(errs.SizeLimitExceeded, "JSON member %q is %d bytes, more than the %d this build validates", m.Name, m.Size, MaxJSONBytes)
	}
	b := make([]byte, m.Size)
	if _, err := io.ReadFull(l.tr, b); err != nil {
		return l.streamErr(err, start, "content of "+m.Name)
	}
	contract, pipeline := isContract(m.Name), isPipeline(m.Name)
	cost := m.Size // the member, read whole
	if contract || pipeline {
		cost += 16 * m.Size // kept as Go values: a slot and a string per two-byte element at worst
	}
	if err := l.charge(cost); err != nil {
		return err
	}
	v, p := checkJSON(b, l.lim.MaxJSONDepth, contract || pipeline)
	switch {
	case p != nil:
	case contract:
		var version string
		if version, p = checkContract(v); p == nil {
			l.a.Contracts = append(l.a.Contracts, Contract{Member: m.Name, Version: version})
		}
	case pipeline:
		l.a.Stages, p = checkPipeline(v)
		l.pipeline = p == nil
	}
	if p != nil {
		return errs.At(p.class, pkg, l.name+": "+m.Name, p.off, "%s", p.msg)
	}
	return nil
}

// copyContent reads a binary member through (so that a truncation is
// reported at this entry).
func (l *loader) copyContent(m Member, start int64) error {
	buf := make([]byte, 32<<10)
	for {
		_, rerr := l.tr.Read(buf)
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return l.streamErr(rerr, start, "content of "+m.Name)
		}
	}
	return nil
}

// end checks what follows the last entry: the end-of-archive marker (two
// zero blocks, which archive/tar has read and checked) and nothing but
// zero blocks after it, which some tar readers would otherwise read on as
// entries we never saw.
func (l *loader) end() error {
	if l.dec.n-l.blockEnd != 2*512 {
		return errs.At(errs.InvalidArchive, pkg, l.name, l.blockEnd, "the end-of-archive marker is missing: the stream is truncated")
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := l.dec.Read(buf)
		for i, c := range buf[:n] {
			if c != 0 {
				return errs.At(errs.InvalidArchive, pkg, l.name, l.dec.n-int64(n-i), "data after the end-of-archive marker")
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return l.streamErr(err, l.dec.n, "after the end-of-archive marker")
		}
	}
	l.frame(l.blockEnd)
	l.a.Extents = append(l.a.Extents, formats.Extent{Kind: formats.Zeros, Offset: l.blockEnd, Size: l.dec.n - l.blockEnd})
	l.a.TarSize = l.dec.n
	return nil
}

// required checks the contents every archive must hold.
func (l *loader) required() error {
	missing := func(what string) error {
		return errs.New(errs.SchemaError, pkg, "%s holds no %s", l.name, what)
	}
	switch {
	case len(l.a.Contracts) == 0:
		return missing("MPK inference contract (mpk.json or *_mpk.json)")
	case !l.pipeline:
		return missing(pipelineName)
	case l.binaries == 0:
		return missing("model binary (*.elf or *.so)")
	}
	return nil
}
