package store

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/objects"
)

// What remotes (internal/remote) need of a store: which blobs it lacks, and
// the named remotes of `mstore remote add`, kept in the index as git keeps
// them in its config.

var bucketRemotes = []byte("remotes")

// MissingBlobs returns those of ds that the index does not record, in order.
func MissingBlobs(tx *bolt.Tx, ds []objects.Digest) []objects.Digest {
	var out []objects.Digest
	b := tx.Bucket(bucketBlobs)
	for _, d := range ds {
		if b.Get(d[:]) == nil {
			out = append(out, d)
		}
	}
	return out
}

// PutRemote records the remote name at url, replacing an older url.
func PutRemote(tx *bolt.Tx, name, url string) error {
	b, err := tx.CreateBucketIfNotExists(bucketRemotes)
	if err != nil {
		return fmt.Errorf("store: remotes: %w", err)
	}
	return b.Put([]byte(name), []byte(url))
}

// RemoveRemote forgets the remote name and reports whether it was there.
func RemoveRemote(tx *bolt.Tx, name string) (bool, error) {
	b := tx.Bucket(bucketRemotes)
	if b == nil || b.Get([]byte(name)) == nil {
		return false, nil
	}
	return true, b.Delete([]byte(name))
}

// Remotes returns every named remote's url, by name.
func Remotes(tx *bolt.Tx) map[string]string {
	out := map[string]string{}
	if b := tx.Bucket(bucketRemotes); b != nil {
		b.ForEach(func(k, v []byte) error {
			out[string(k)] = string(bytes.Clone(v))
			return nil
		})
	}
	return out
}
