package store

import (
	"os"
	"path/filepath"
	"syscall"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/objects"
)

// Usage is what a store holds: logical bytes of all its versions against the
// bytes it really keeps.
type Usage struct {
	Versions     int   `json:"versions"`
	Blobs        int   `json:"blobs"`
	LogicalBytes int64 `json:"logical_bytes"` // sum of every version's file sizes
	BlobBytes    int64 `json:"blob_bytes"`    // sum of recorded blob sizes (unique raw bytes)
	IndexBytes   int64 `json:"index_bytes"`   // index.db on disk (its allocated blocks)
	StoredBytes  int64 `json:"stored_bytes"`  // blob bytes as kept on disk + index
	// UniqueRawBytes is BlobBytes under the name the figures use;
	// StoredBlobBytes is what the blobs take on disk once coded.
	UniqueRawBytes  int64 `json:"unique_raw_bytes"`
	StoredBlobBytes int64 `json:"stored_blob_bytes"`
	// Codings holds, for each coding (raw, grouped, delta), its blobs, their
	// raw and stored bytes and the ratio stored / raw.
	Codings map[string]*CodingStats `json:"codings"`
	// Unreadable lists the versions whose manifest cannot be read: they
	// count in Versions, not in LogicalBytes.
	Unreadable []UnreadableVersion `json:"unreadable"`
}

// UnreadableVersion is a version a command could not read, and why.
type UnreadableVersion struct {
	Version objects.Digest `json:"version"`
	Error   string         `json:"error"`
}

// DedupRatio is logical bytes per stored byte.
func (u Usage) DedupRatio() float64 {
	if u.StoredBytes == 0 {
		return 0
	}
	return float64(u.LogicalBytes) / float64(u.StoredBytes)
}

// Usage adds up the store's versions and blobs. A version that cannot be
// read is listed in Unreadable and the rest is counted: the caller reports
// it.
func (s *Store) Usage() (Usage, error) {
	u := Usage{Unreadable: []UnreadableVersion{}, Codings: map[string]*CodingStats{}}
	err := s.View(func(tx *bolt.Tx) error {
		err := ForEachManifest(tx, func(d objects.Digest) error {
			u.Versions++
			m, err := s.Manifest(tx, d)
			if err != nil {
				u.Unreadable = append(u.Unreadable, UnreadableVersion{Version: d, Error: err.Error()})
				return nil
			}
			u.LogicalBytes += m.LogicalBytes()
			return nil
		})
		if err != nil {
			return err
		}
		return ForEachBlob(tx, func(r BlobRecord) error {
			u.Blobs++
			u.BlobBytes += r.Size
			u.StoredBlobBytes += r.StoredSize()
			c := u.Codings[r.Coding.String()]
			if c == nil {
				c = &CodingStats{}
				u.Codings[r.Coding.String()] = c
			}
			c.Blobs++
			c.RawBytes += r.Size
			c.StoredBytes += r.StoredSize()
			return nil
		})
	})
	if err != nil {
		return u, err
	}
	if info, err := os.Stat(filepath.Join(s.dir, indexFile)); err == nil {
		u.IndexBytes = info.Size()
		// bbolt grows the file 16 MB at a time, by truncate: what the
		// disk holds of it is its allocated blocks.
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			u.IndexBytes = min(u.IndexBytes, st.Blocks*512)
		}
	}
	u.UniqueRawBytes = u.BlobBytes
	u.StoredBytes = u.StoredBlobBytes + u.IndexBytes
	for _, c := range u.Codings {
		if c.RawBytes > 0 {
			c.Ratio = float64(c.StoredBytes) / float64(c.RawBytes)
		}
	}
	return u, nil
}
