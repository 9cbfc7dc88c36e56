package s3remote

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/remote"
)

// Small blobs travel in packs: a bucket has no batch request, so a model
// of 100,000 small tensors would otherwise be 100,000 PUTs to push and
// 100,000 GETs to pull. PutBlobs writes the small blobs of one call into
// one pack object and then its index, both with If-None-Match (named by
// the index's digest, so two pushes of one batch write the same keys);
// readers find a blob through the indexes, which they load once and keep,
// and read it by Range, many neighbours of one pack in one GET.
//
//	PREFIX/packs/HEX.pack   the blobs' bytes, one after the other
//	PREFIX/packs/HEX.idx    packIndexMagic, count(4), then per blob digest(32) offset(8) size(8)
//
// A pack whose index is missing (a push stopped between the two writes)
// holds nothing anyone can find; gc removes it after the grace period.

// packBelow is the size under which PutBlobs packs a blob.
const packBelow = 1 << 20

// coalesceGap is the gap between two wanted blobs of one pack under which
// one GET reads both and the bytes between: cheaper than a round trip.
const coalesceGap = 256 << 10

const packIndexMagic = "mstore-s3-pack-index 1\n"

const packEntry = 32 + 8 + 8

// maxPackIndex bounds an index object (a pack holds one PutBlobs call).
const maxPackIndex = int64(len(packIndexMagic)) + 4 + remote.MaxBatchBlobs*packEntry

type packLoc struct {
	pack      string // HEX
	off, size int64
}

// packCache is what this client knows of the bucket's packs.
type packCache struct {
	mu     sync.Mutex
	loaded map[string]bool // pack HEX → its index was read
	where  map[objects.Digest]packLoc

	// One refresh at a time; a caller that waited for one that started
	// after it asked takes its result (eight pull jobs list once).
	refreshing sync.Mutex
	lastStart  time.Time
}

func (r *Remote) packKey(h string) string  { return r.prefix + "packs/" + h + ".pack" }
func (r *Remote) indexKey(h string) string { return r.prefix + "packs/" + h + ".idx" }

func encodePackIndex(locs []packLoc, ds []objects.Digest) []byte {
	b := make([]byte, 0, len(packIndexMagic)+4+len(ds)*packEntry)
	b = append(b, packIndexMagic...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ds)))
	for i, d := range ds {
		b = append(b, d[:]...)
		b = binary.BigEndian.AppendUint64(b, uint64(locs[i].off))
		b = binary.BigEndian.AppendUint64(b, uint64(locs[i].size))
	}
	return b
}

// decodePackIndex parses the index of pack h, refusing one whose entries
// are not the blobs of one PutBlobs call laid end to end.
func decodePackIndex(h string, b []byte) ([]objects.Digest, []packLoc, error) {
	bad := func(why string) error {
		return errs.New(errs.IntegrityError, "s3", "pack index %s: %s", h, why)
	}
	if !bytes.HasPrefix(b, []byte(packIndexMagic)) || len(b) < len(packIndexMagic)+4 {
		return nil, nil, bad("not a pack index")
	}
	b = b[len(packIndexMagic):]
	n := int(binary.BigEndian.Uint32(b))
	b = b[4:]
	if n > remote.MaxBatchBlobs || len(b) != n*packEntry {
		return nil, nil, bad(fmt.Sprintf("%d entries in %d bytes", n, len(b)))
	}
	ds, locs := make([]objects.Digest, n), make([]packLoc, n)
	var end int64
	for i := range n {
		e := b[i*packEntry:]
		ds[i] = objects.Digest(e[:32])
		locs[i] = packLoc{pack: h, off: int64(binary.BigEndian.Uint64(e[32:])), size: int64(binary.BigEndian.Uint64(e[40:]))}
		if locs[i].off != end || locs[i].size <= 0 || locs[i].size > packBelow {
			return nil, nil, bad(fmt.Sprintf("entry %d at %d+%d", i, locs[i].off, locs[i].size))
		}
		end += locs[i].size
	}
	if end > remote.MaxBatchBytes {
		return nil, nil, bad(fmt.Sprintf("%d bytes of blobs", end))
	}
	return ds, locs, nil
}

// putPack writes blobs as one pack and its index, and notes them.
func (r *Remote) putPack(ctx context.Context, blobs []remote.Blob) error {
	var data bytes.Buffer
	ds, locs := make([]objects.Digest, len(blobs)), make([]packLoc, len(blobs))
	for i, b := range blobs {
		ds[i], locs[i] = b.Digest, packLoc{off: int64(data.Len()), size: int64(len(b.Data))}
		data.Write(b.Data)
	}
	idx := encodePackIndex(locs, ds)
	h := objects.Sum(idx).String()
	// The pack first: an index is never there without its pack.
	for _, o := range []struct {
		key  string
		data []byte
	}{{r.packKey(h), data.Bytes()}, {r.indexKey(h), idx}} {
		if err := r.put(ctx, o.key, o.data, true, ""); err != nil && !isPrecondition(err) {
			return r.wrap(err, "put pack to")
		}
	}
	r.packs.add(h, ds, locs)
	return nil
}

func (c *packCache) add(h string, ds []objects.Digest, locs []packLoc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loaded == nil {
		c.loaded, c.where = map[string]bool{}, map[objects.Digest]packLoc{}
	}
	c.loaded[h] = true
	for i, d := range ds {
		locs[i].pack = h
		c.where[d] = locs[i]
	}
}

// drop forgets pack h (gc removed it): its blobs are looked for again.
func (c *packCache) drop(h string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.loaded, h)
	for d, l := range c.where {
		if l.pack == h {
			delete(c.where, d)
		}
	}
}

// keepOnly forgets every pack not in hs, the packs a listing found.
func (c *packCache) keepOnly(hs []string) {
	listed := make(map[string]bool, len(hs))
	for _, h := range hs {
		listed[h] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	gone := false
	for h := range c.loaded {
		if !listed[h] {
			delete(c.loaded, h)
			gone = true
		}
	}
	if gone {
		for d, l := range c.where {
			if !c.loaded[l.pack] {
				delete(c.where, d)
			}
		}
	}
}

func (c *packCache) find(d objects.Digest) (packLoc, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.where[d]
	return l, ok
}

func (c *packCache) isLoaded(h string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loaded[h]
}

// packIndexes lists the bucket's pack indexes by pack HEX.
func (r *Remote) packIndexes(ctx context.Context) ([]string, error) {
	var out []string
	err := r.list(ctx, "packs/", func(o minio.ObjectInfo) error {
		name := strings.TrimPrefix(o.Key, r.prefix+"packs/")
		if h, ok := strings.CutSuffix(name, ".idx"); ok {
			if _, err := objects.ParseDigest(h); err == nil {
				out = append(out, h)
			}
		}
		return nil
	})
	return out, err
}

// readPackIndex reads and checks the index of pack h.
func (r *Remote) readPackIndex(ctx context.Context, h string) ([]objects.Digest, []packLoc, error) {
	b, _, err := r.get(ctx, r.indexKey(h), maxPackIndex, minio.GetObjectOptions{})
	if err != nil {
		return nil, nil, r.wrap(err, "read pack index of")
	}
	if objects.Sum(b).String() != h {
		return nil, nil, errs.New(errs.IntegrityError, "s3", "pack index %s on %s does not hash to its name", h, r.url)
	}
	return decodePackIndex(h, b)
}

// refreshPacks loads the indexes of packs written since the last look (by
// other clients; this one notes its own as it writes them) and forgets
// those a gc removed since.
func (r *Remote) refreshPacks(ctx context.Context) error {
	asked := time.Now()
	r.packs.refreshing.Lock()
	defer r.packs.refreshing.Unlock()
	if r.packs.lastStart.After(asked) {
		return nil
	}
	started := time.Now()
	all, err := r.packIndexes(ctx)
	if err != nil {
		return err
	}
	r.packs.keepOnly(all)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for _, h := range all {
		if r.packs.isLoaded(h) {
			continue
		}
		g.Go(func() error {
			ds, locs, err := r.readPackIndex(gctx, h)
			if isNotFound(err) {
				return nil // removed by a gc since the listing
			}
			if err != nil {
				return err
			}
			r.packs.add(h, ds, locs)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	r.packs.lastStart = started
	return nil
}

// locate finds which of ds are in packs, refreshing the indexes once if
// some are not in the ones known, or always with fresh: HasBlobs must not
// answer from a pack a gc has removed since (a push would skip the blob).
func (r *Remote) locate(ctx context.Context, ds []objects.Digest, fresh bool) ([]packLoc, []bool, error) {
	locs, in := make([]packLoc, len(ds)), make([]bool, len(ds))
	pending := fresh && len(ds) > 0
	for i, d := range ds {
		locs[i], in[i] = r.packs.find(d)
		pending = pending || !in[i]
	}
	if !pending {
		return locs, in, nil
	}
	if err := r.refreshPacks(ctx); err != nil {
		return nil, nil, err
	}
	for i, d := range ds {
		locs[i], in[i] = r.packs.find(d)
	}
	return locs, in, nil
}

// span is one ranged GET of a pack: [off, end) holding the wanted blobs.
type span struct {
	pack     string
	off, end int64
	want     []int // indexes into the caller's lists
}

// spans groups the packed blobs at idx (of locs) into ranged reads: one
// per run of a pack's blobs with gaps under coalesceGap.
func spans(locs []packLoc, idx []int) []span {
	sort.Slice(idx, func(a, b int) bool {
		la, lb := locs[idx[a]], locs[idx[b]]
		if la.pack != lb.pack {
			return la.pack < lb.pack
		}
		return la.off < lb.off
	})
	var out []span
	for _, i := range idx {
		l := locs[i]
		if n := len(out); n > 0 && out[n-1].pack == l.pack && l.off-out[n-1].end < coalesceGap {
			out[n-1].end = max(out[n-1].end, l.off+l.size)
			out[n-1].want = append(out[n-1].want, i)
			continue
		}
		out = append(out, span{pack: l.pack, off: l.off, end: l.off + l.size, want: []int{i}})
	}
	return out
}

// readSpan reads one span and cuts its blobs out into out.
func (r *Remote) readSpan(ctx context.Context, s span, locs []packLoc, out [][]byte) error {
	var opts minio.GetObjectOptions
	if err := opts.SetRange(s.off, s.end-1); err != nil {
		return err
	}
	b, _, err := r.get(ctx, r.packKey(s.pack), s.end-s.off, opts)
	if err != nil {
		return err
	}
	if int64(len(b)) != s.end-s.off {
		return errs.New(errs.IntegrityError, "s3", "pack %s on %s is shorter than its index says", s.pack, r.url)
	}
	for _, i := range s.want {
		l := locs[i]
		out[i] = b[l.off-s.off : l.off-s.off+l.size : l.off-s.off+l.size]
	}
	return nil
}

// getPacked reads the packed blobs at idx into out. A pack gone since its
// index was read (a gc) is forgotten, and its blobs are reported in lost,
// to be looked for again.
func (r *Remote) getPacked(ctx context.Context, locs []packLoc, idx []int, out [][]byte) (lost []int, err error) {
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for _, s := range spans(locs, idx) {
		g.Go(func() error {
			err := r.readSpan(gctx, s, locs, out)
			if isNotFound(err) {
				r.packs.drop(s.pack)
				mu.Lock()
				lost = append(lost, s.want...)
				mu.Unlock()
				return nil
			}
			return r.wrap(err, "read pack from")
		})
	}
	return lost, g.Wait()
}

// getPackedOne reads the packed blob d at l; not_found if its pack is gone.
func (r *Remote) getPackedOne(ctx context.Context, d objects.Digest, l packLoc) ([]byte, error) {
	out := make([][]byte, 1)
	lost, err := r.getPacked(ctx, []packLoc{l}, []int{0}, out)
	if err != nil {
		return nil, err
	}
	if len(lost) > 0 {
		return nil, remote.NoBlob(r.url, d)
	}
	return out[0], nil
}
