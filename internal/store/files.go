package store

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mstore/mstore/internal/objects"
)

const packsDir = "packs"

// FileKind says what a file in the store directory is, judged by its name.
// Its zero value is invalid.
type FileKind int

const (
	_ FileKind = iota
	// FileLoose is objects/ab/<digest>: one blob.
	FileLoose
	// FilePack is objects/packs/<id>.pack.
	FilePack
	// FileTemp is anything under tmp/: a file being written, or left by a
	// command that crashed.
	FileTemp
	// FileUnknown is anything else under objects/: mstore never writes
	// such a file, so it never deletes one either.
	FileUnknown
)

func (k FileKind) String() string {
	switch k {
	case FileLoose:
		return "blob"
	case FilePack:
		return "pack"
	case FileTemp:
		return "temp"
	case FileUnknown:
		return "unknown"
	}
	return fmt.Sprintf("FileKind(%d)", int(k))
}

// StoredFile is a file found under objects/ or tmp/.
type StoredFile struct {
	Kind    FileKind
	Path    string         // absolute
	Rel     string         // relative to the store directory, slash-separated
	Digest  objects.Digest // for FileLoose
	Pack    PackID         // for FilePack
	Size    int64
	ModTime time.Time
}

// WalkFiles calls fn for every file under objects/ and tmp/. A directory
// it cannot read is an error: gc and fsck must never judge a store by half
// of its files.
func (s *Store) WalkFiles(fn func(StoredFile) error) error {
	for _, top := range []string{objectsDir, tmpDir} {
		root := filepath.Join(s.dir, top)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == root && errors.Is(err, fs.ErrNotExist) {
					return filepath.SkipDir
				}
				return err
			}
			if d.IsDir() {
				return nil
			}
			info, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed since the directory was read
			}
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(s.dir, p)
			f := StoredFile{Path: p, Rel: filepath.ToSlash(rel), Size: info.Size(), ModTime: info.ModTime()}
			s.classify(&f, top, info)
			return fn(f)
		})
		if err != nil {
			return fmt.Errorf("store: list files: %w", err)
		}
	}
	return nil
}

func (s *Store) classify(f *StoredFile, top string, info fs.FileInfo) {
	f.Kind = FileUnknown
	if top == tmpDir {
		f.Kind = FileTemp
		return
	}
	if !info.Mode().IsRegular() {
		return
	}
	parts := strings.Split(f.Rel, "/") // objects/ab/<digest> or objects/packs/<id>.pack
	if len(parts) != 3 {
		return
	}
	if parts[1] == packsDir {
		id, ok := strings.CutSuffix(parts[2], ".pack")
		b, err := hex.DecodeString(id)
		if ok && err == nil && len(b) == len(f.Pack) && hex.EncodeToString(b) == id {
			copy(f.Pack[:], b)
			f.Kind = FilePack
		}
		return
	}
	d, err := objects.ParseDigest(parts[2])
	if err == nil && d.String() == parts[2] && parts[1] == parts[2][:2] {
		f.Digest = d
		f.Kind = FileLoose
	}
}

// RemoveFile deletes a file of the store (through Options.FS). A file that
// is already gone is not an error.
func (s *Store) RemoveFile(path string) error {
	if err := s.fs.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("store: remove %s: %w", path, err)
	}
	return nil
}
