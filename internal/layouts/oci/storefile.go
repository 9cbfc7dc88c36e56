package oci

import (
	"io"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
)

// fileReader streams one file of a version out of the store, blob by
// blob, each verified against its digest as the store reads it.
type fileReader struct {
	rd    *store.BlobReader
	recs  map[objects.Digest]store.BlobRecord
	parts []part
	buf   []byte
	cur   []byte
	err   error
}

// part is a blob or a run of zeros.
type part struct {
	blob  objects.Digest
	zeros int64
}

// OpenFile streams file f of version m out of st; recs are the records of
// m's blobs.
func OpenFile(st *store.Store, m *objects.Manifest, f *objects.File, recs map[objects.Digest]store.BlobRecord) io.ReadCloser {
	fr := &fileReader{rd: st.NewBlobReader(), recs: recs}
	for _, e := range f.Extents {
		switch e.Kind {
		case objects.ExtentZeros:
			fr.parts = append(fr.parts, part{zeros: e.Size})
		case objects.ExtentTensor:
			for _, c := range m.Tensors[e.Tensor].Chunks {
				fr.parts = append(fr.parts, part{blob: c})
			}
		case objects.ExtentFrame:
			for _, c := range e.Data.Chunks {
				fr.parts = append(fr.parts, part{blob: c})
			}
		}
	}
	return fr
}

var zeroBlock = make([]byte, 64<<10)

// Close releases the store files the reader holds open.
func (fr *fileReader) Close() error {
	if fr.err == nil {
		fr.err = io.ErrClosedPipe
	}
	return fr.rd.Close()
}

func (fr *fileReader) Read(p []byte) (int, error) {
	for len(fr.cur) == 0 {
		if fr.err != nil {
			return 0, fr.err
		}
		if len(fr.parts) == 0 {
			fr.err = io.EOF
			return 0, io.EOF
		}
		pt := &fr.parts[0]
		if pt.zeros > 0 {
			n := min(pt.zeros, int64(len(zeroBlock)))
			fr.cur, pt.zeros = zeroBlock[:n], pt.zeros-n
			if pt.zeros == 0 {
				fr.parts = fr.parts[1:]
			}
			break
		}
		if pt.blob.IsZero() {
			fr.parts = fr.parts[1:]
			continue
		}
		rec, ok := fr.recs[pt.blob]
		if !ok {
			fr.err = errs.New(errs.IntegrityError, pkg, "blob %s of the version is not in the store (run mstore fsck)", pt.blob.Short())
			continue
		}
		fr.buf, fr.err = fr.rd.Read(rec, fr.buf[:0])
		fr.cur = fr.buf
		fr.parts = fr.parts[1:]
	}
	n := copy(p, fr.cur)
	fr.cur = fr.cur[n:]
	return n, nil
}
