package restorer

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
)

// exchange swaps two directories atomically (renameat2 RENAME_EXCHANGE).
// Tests replace it to make a swap, or the swap back, fail.
var exchange = func(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}

// renameNoReplace moves a to b unless b exists.
func renameNoReplace(a, b string) error {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_NOREPLACE)
	if unsupported(err) {
		// A file system without renameat2 flags: rename(2) only replaces
		// an empty directory, which holds nothing to lose.
		if _, serr := os.Lstat(b); serr == nil {
			return unix.EEXIST
		}
		err = os.Rename(a, b)
	}
	return err
}

func unsupported(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP)
}

// published is what publish reports beside success.
type published struct {
	note string // for the user, e.g. that the checkout is not recorded
}

// publish makes the tree written in w durable, records it in the store,
// and puts it at dest: by a rename when dest does not exist, else by
// exchanging it with the old dest (checked again right before), whose
// recorded files are then removed. A failure after the exchange swaps the
// trees back; a swap back that fails is reported with where each tree is.
func publish(st *store.Store, w *workDir, dest, key string, d objects.Digest, old *oldDest) (published, error) {
	var out published
	if err := syncFS(w.dir); err != nil {
		return out, err
	}
	rec, err := recordTree(w.dir)
	if err != nil {
		return out, err
	}
	rec.Dest, rec.Digest = key, d
	data, err := json.Marshal(rec)
	if err != nil {
		return out, fmt.Errorf("checkout: %w", err)
	}
	newName := recordName(key, w.dev, w.ino)
	if err := st.PutCheckoutRecord(newName, data); err != nil {
		if !readOnly(err) {
			return out, err
		}
		out.note = "the store is read-only, so this checkout is not recorded: --force will not replace it later"
		newName = ""
	}
	done := false
	defer func() {
		if !done && newName != "" {
			st.RemoveCheckoutRecord(newName)
		}
	}()
	parent := filepath.Dir(dest)

	if old == nil {
		if err := renameNoReplace(w.dir, dest); err != nil {
			if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) {
				return out, errs.New(errs.Conflict, "checkout", "%s appeared while checking out; nothing was replaced: check out again", dest)
			}
			return out, fmt.Errorf("checkout: %w", err)
		}
		if err := syncDir(parent); err != nil {
			return out, undo(err, dest, w.dir, func() error { return renameNoReplace(dest, w.dir) })
		}
		w.published, done = true, true
		pruneRecords(st, key, newName)
		return out, nil
	}

	// DEST may have changed while the files were written.
	if err := recheck(dest, old); err != nil {
		return out, err
	}
	if err := w.willReplace(old.rec); err != nil {
		return out, err
	}
	if err := exchange(w.dir, dest); err != nil {
		if unsupported(err) {
			return out, fmt.Errorf("checkout: this file system cannot swap %s atomically (renameat2 RENAME_EXCHANGE: %v); move it away and check out again", dest, err)
		}
		return out, fmt.Errorf("checkout: replace %s: %w", dest, err)
	}
	store.Failpoint(store.FailCheckoutExchanged)
	swapBack := func() error { return exchange(w.dir, dest) }
	if info, err := os.Lstat(w.dir); err != nil || !sameDevIno(info, old.rec.Dev, old.rec.Ino) {
		cause := errs.New(errs.Conflict, "checkout", "%s was replaced by another directory while checking out", dest)
		return out, undo(cause, dest, w.dir, swapBack)
	}
	if err := syncDir(parent); err != nil {
		return out, undo(err, dest, w.dir, swapBack)
	}
	w.published, done = true, true
	if old.name != "" {
		st.RemoveCheckoutRecord(old.name)
	}
	pruneRecords(st, key, newName)
	kept, err := removeRecorded(w.dir, old.rec)
	if err == nil && len(kept) == 0 {
		return out, nil
	}
	// Files appeared in the old tree as it was swapped out: never ours to
	// delete. Give them a visible name beside DEST.
	var rnd [4]byte
	rand.Read(rnd[:])
	aside := dest + ".mstore-replaced-" + hex.EncodeToString(rnd[:])
	if rerr := os.Rename(w.dir, aside); rerr != nil {
		aside = w.dir
	}
	if err != nil {
		return out, fmt.Errorf("%w; %s is checked out, and what is left of the tree it replaced is in %s", err, dest, aside)
	}
	return out, errs.New(errs.Conflict, "checkout", "%s is checked out, but the tree it replaced held files mstore did not write (%s), which appeared while it was replaced; they are kept in %s",
		dest, listNames(kept), aside)
}

// recheck checks old DEST again just before it is replaced.
func recheck(dest string, old *oldDest) error {
	info, err := os.Lstat(dest)
	if err != nil || !info.IsDir() || !sameDevIno(info, old.rec.Dev, old.rec.Ino) {
		return errs.New(errs.Conflict, "checkout", "%s was replaced or removed while checking out; nothing was replaced: check out again", dest)
	}
	return requireUnchanged(dest, old.rec)
}

// undo runs swap to put dest back as it was after cause; a swap that
// fails is reported with cause, saying where each tree is.
func undo(cause error, dest, tmp string, swap func() error) error {
	if err := swap(); err != nil {
		return fmt.Errorf("%w; putting %s back failed too (%v): the new checkout is at %s and what was there before is at %s", cause, dest, err, dest, tmp)
	}
	return fmt.Errorf("%w; %s is as it was", cause, dest)
}

func sameDevIno(info os.FileInfo, dev, ino uint64) bool {
	d, i := devIno(info)
	return d == dev && i == ino
}

// pruneRecords removes the records of earlier checkouts at key except
// keep: their directories are gone (replaced, or removed by the user).
func pruneRecords(st *store.Store, key, keep string) {
	names, err := st.CheckoutRecordNames(recordPrefix(key))
	if err != nil {
		return
	}
	var current string // the directory at key now (keep is "" on a read-only store)
	if info, err := os.Lstat(key); err == nil {
		dev, ino := devIno(info)
		current = recordName(key, dev, ino)
	}
	for _, n := range names {
		if n != keep && n != current {
			st.RemoveCheckoutRecord(n)
		}
	}
}

func readOnly(err error) bool {
	return errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}
