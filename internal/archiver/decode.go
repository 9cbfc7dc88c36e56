package archiver

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
)

// decoders returns, for each compressed file of the layout (an MPK
// .tar.gz: Meta[formats.MetaCompression] set), how to open its decoded
// stream, which its extents describe. The stream cannot be read at random
// offsets, so it is decoded once, into an unlinked temp file in the
// store's temp area (on the store's filesystem, which must have room for
// the blobs anyway), and read back from there.
func decoders(codec formats.Codec, dir formats.Dir, l *formats.Layout, st *store.Store, parsed *recordingDir) (map[string]func() (formats.ReadAtCloser, error), error) {
	out := map[string]func() (formats.ReadAtCloser, error){}
	for _, f := range l.Files {
		if f.Meta[formats.MetaCompression] == "" {
			continue
		}
		dec, ok := codec.(formats.Decoder)
		if !ok || parsed == nil {
			return nil, fmt.Errorf("add: codec %s lays out compressed %s but cannot decode it", codec.Name(), f.Path)
		}
		want, ok := parsed.digest(f.Path)
		if !ok {
			return nil, fmt.Errorf("add: codec %s did not read %s whole, in one pass: add cannot check that the stream it stores is the one parsed", codec.Name(), f.Path)
		}
		out[f.Path] = func() (formats.ReadAtCloser, error) {
			return spool(dec, dir, f.Path, f.Size, filepath.Join(st.Dir(), "tmp"), want)
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
// is the one the codec parsed: the compressed bytes the decoder read hash
// to want (what the parser read), and the stream is the size it found.
func spool(dec formats.Decoder, dir formats.Dir, p string, size int64, tmpDir string, want objects.Digest) (formats.ReadAtCloser, error) {
	rd := newRecordingDir(dir)
	rd.complete = true
	rc, err := dec.Decode(rd, p)
	if err != nil {
		return nil, err
	}
	closed := false
	defer func() {
		if !closed {
			rc.Close()
		}
	}()
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
		return nil, errChanged(p, "its decoded stream no longer matches what was parsed")
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("add: decode %s: %w", p, err)
	}
	closed = true
	if err := rc.Close(); err != nil {
		f.Close()
		return nil, errChanged(p, fmt.Sprintf("it can no longer be read: %v", err))
	}
	if got, ok := rd.digest(p); !ok || got != want {
		f.Close()
		return nil, errChanged(p, "its compressed bytes are not the ones parsed")
	}
	return spooled{File: f, size: size}, nil
}
