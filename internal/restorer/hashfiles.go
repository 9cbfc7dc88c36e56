package restorer

import (
	"context"
	"hash"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
)

// HashFiles rebuilds each file of m in memory, a blob at a time, and
// returns its digest under newHash (sha256 for `show --sha256`: what Hugging
// Face and Ollama name files by), by path. Each file's BLAKE3 is checked on
// the way, so a digest printed is of the bytes checkout would write.
// Memory stays at one blob whatever the file's size.
func HashFiles(ctx context.Context, st *store.Store, m *objects.Manifest, newHash func() hash.Hash) (map[string][]byte, error) {
	lock, err := st.Lock(store.LockShared, 0) // gc waits until the blobs are read
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	p := &plan{}
	for _, f := range m.Files {
		p.files = append(p.files, storedFile(m, f))
	}
	blobs, err := openBlobs(st, p)
	if err != nil {
		return nil, err
	}
	defer blobs.Close()
	out := make(map[string][]byte, len(m.Files))
	var buf []byte
	zeros := make([]byte, 64<<10)
	for i, pf := range p.files {
		f := m.Files[i]
		h, check := newHash(), objects.NewHasher()
		for _, pc := range pf.pieces {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if pc.zeros {
				for n := pc.size; n > 0; {
					k := min(n, int64(len(zeros)))
					h.Write(zeros[:k])
					check.Write(zeros[:k])
					n -= k
				}
				continue
			}
			if buf, err = blobs.readOne(pc, buf[:0]); err != nil {
				return nil, err
			}
			h.Write(buf)
			check.Write(buf)
		}
		if got := check.Digest(); got != f.Digest {
			return nil, errs.New(errs.IntegrityError, "show", "%s rebuilds to BLAKE3 %s, the manifest says %s (run `mstore fsck`)", f.Path, got.Short(), f.Digest.Short())
		}
		out[f.Path] = h.Sum(nil)
	}
	return out, nil
}
