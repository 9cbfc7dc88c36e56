package archiver

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mstore/mstore/formats"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/modeldir"
	"github.com/mstore/mstore/store"
)

// decoders returns, for each compressed file of the layout (an MPK
// .tar.gz: Meta[formats.MetaCompression] set), how to open its decoded
// stream, which its extents describe. The stream cannot be read at random
// offsets, so it is decoded once, into an unlinked temp file in the
// store's temp area (on the store's filesystem, which must have room for
// the blobs anyway), and read back from there.
func decoders(codec formats.Codec, dir *modeldir.Dir, l *formats.Layout, st *store.Store) (map[string]func() (formats.ReadAtCloser, error), error) {
	out := map[string]func() (formats.ReadAtCloser, error){}
	for _, f := range l.Files {
		if f.Meta[formats.MetaCompression] == "" {
			continue
		}
		dec, ok := codec.(formats.Decoder)
		if !ok {
			return nil, fmt.Errorf("add: codec %s lays out compressed %s but cannot decode it", codec.Name(), f.Path)
		}
		out[f.Path] = func() (formats.ReadAtCloser, error) {
			return spool(dec, dir, f.Path, f.Size, filepath.Join(st.Dir(), "tmp"))
		}
	}
	return out, nil
}

// spooled is a decoded stream in an unlinked temp file.
type spooled struct {
	*os.File
	size int64
}

func (s spooled) Size() int64 { return s.size }

// errRead marks a failure to read the decoded stream (as opposed to
// writing the temp file).
type errRead struct{ error }

type readMarker struct{ r io.Reader }

func (m readMarker) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if err != nil && err != io.EOF {
		err = errRead{err}
	}
	return n, err
}

// spool decodes p into a temp file in tmpDir that is unlinked at once (so
// it disappears when closed, whatever happens) and checks that the stream
// is the size the codec found when it parsed the file.
func spool(dec formats.Decoder, dir formats.Dir, p string, size int64, tmpDir string) (formats.ReadAtCloser, error) {
	rc, err := dec.Decode(dir, p)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if err := os.MkdirAll(tmpDir, 0o755); err != nil {
		return nil, fmt.Errorf("add: %w", err)
	}
	f, err := os.CreateTemp(tmpDir, "decoded-*")
	if err != nil {
		return nil, fmt.Errorf("add: %w", err)
	}
	os.Remove(f.Name())
	n, err := io.Copy(f, readMarker{io.LimitReader(rc, size+1)})
	var rerr errRead
	switch {
	case errors.As(err, &rerr) || err == nil && n != size:
		f.Close()
		return nil, errs.New(errs.IntegrityError, "add", "%s changed while it was being added (its decoded stream no longer matches what was parsed); add it again when nothing writes to it", p)
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("add: decode %s: %w", p, err)
	}
	return spooled{File: f, size: size}, nil
}
