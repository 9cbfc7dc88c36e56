package store

import (
	"errors"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/mstore/mstore/internal/errs"
)

// ownEntries are the names a store's directory holds (and all a store
// being created, or left by a crash while it was created, may hold).
// A fresh file system's lost+found is no one's data either.
var ownEntries = map[string]bool{indexFile: true, journalFile: true, objectsDir: true, tmpDir: true, lockFile: true, "lost+found": true}

// maxListed bounds how many of a directory's names are read to decide.
const maxListed = 64

// checkNewStoreDir refuses to make a store in a directory that already
// holds something else (a model directory, a home directory): the store's
// files would be mixed into it, and a later add would store them. A
// missing or empty directory, or one holding only a store's own entries,
// is fine.
func checkNewStoreDir(dir string) error {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	names, err := f.Readdirnames(maxListed)
	if err != nil && err != io.EOF {
		return err
	}
	var foreign []string
	for _, n := range names {
		// index.db.damaged-TIME: an index fsck --rebuild-index moved aside.
		if !ownEntries[n] && !strings.HasPrefix(n, indexFile+".") {
			foreign = append(foreign, n)
		}
	}
	if len(foreign) == 0 {
		return nil
	}
	sort.Strings(foreign)
	if len(foreign) > 3 {
		foreign = append(foreign[:3], "…")
	}
	return &errs.Error{Class: errs.Conflict, Pkg: "store", Path: dir, Offset: -1,
		Msg: "not empty and not a store (it holds " + strings.Join(foreign, ", ") +
			"); give an empty or new directory to --store or `mstore init`"}
}
