package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mstore/mstore/internal/errs"
)

// checkoutsDir holds one small record per checkout destination: what that
// checkout wrote, so that `checkout --force` can later replace exactly that
// and nothing else. The records are the restorer's; the store only keeps
// them durably. They live outside objects/ and tmp/, so fsck and gc never
// take them for blobs or leftovers, and outside index.db, so that an index
// rebuild neither needs nor loses them.
const checkoutsDir = "checkouts"

// validRecordName accepts the names the restorer makes (hex digits, dots,
// dashes): a record name can never lead out of checkouts/.
func validRecordName(name string) bool {
	if name == "" || len(name) > 200 {
		return false
	}
	for _, r := range name {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r == '.' || r == '-') {
			return false
		}
	}
	return !strings.HasPrefix(name, ".")
}

// PutCheckoutRecord writes data as the checkout record name, durably: a
// temp file in tmp/, synced, renamed into checkouts/, the directory synced.
// A record that exists is replaced.
func (s *Store) PutCheckoutRecord(name string, data []byte) error {
	if !validRecordName(name) {
		return fmt.Errorf("store: invalid checkout record name %q", name)
	}
	dir := filepath.Join(s.dir, checkoutsDir)
	if err := s.fs.MkdirAll(dir); err != nil {
		return fmt.Errorf("store: checkout record: %w", err)
	}
	tmp, err := s.writeSyncedTemp("checkout-"+name, data)
	if err != nil {
		return err
	}
	Failpoint(FailCheckoutRecordTemp)
	if err := s.fs.Rename(tmp, filepath.Join(dir, name)); err != nil {
		s.fs.Remove(tmp)
		return fmt.Errorf("store: checkout record: %w", err)
	}
	if err := s.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("store: checkout record: %w", err)
	}
	return nil
}

// CheckoutRecord returns the record name; one that does not exist is
// not_found.
func (s *Store) CheckoutRecord(name string) ([]byte, error) {
	if !validRecordName(name) {
		return nil, fmt.Errorf("store: invalid checkout record name %q", name)
	}
	b, err := os.ReadFile(filepath.Join(s.dir, checkoutsDir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, errs.New(errs.NotFound, "store", "no checkout record %s", name)
	}
	if err != nil {
		return nil, fmt.Errorf("store: checkout record: %w", err)
	}
	return b, nil
}

// CheckoutRecordNames lists the records whose names start with prefix.
func (s *Store) CheckoutRecordNames(prefix string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, checkoutsDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: checkout records: %w", err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && validRecordName(e.Name()) && e.Type().IsRegular() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// RemoveCheckoutRecord removes the record name; one already gone is fine.
func (s *Store) RemoveCheckoutRecord(name string) error {
	if !validRecordName(name) {
		return fmt.Errorf("store: invalid checkout record name %q", name)
	}
	err := s.fs.Remove(filepath.Join(s.dir, checkoutsDir, name))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("store: checkout record: %w", err)
	}
	return nil
}

// writeSyncedTemp is writeTemp for one small file that must be durable
// before it is renamed: an fsync of that file, not a syncfs of the whole
// file system (a checkout has just synced the one it wrote to; a second
// syncfs waited again for every other writer's pages). A file of an FS
// that cannot fsync one file is made durable by a syncfs.
func (s *Store) writeSyncedTemp(name string, data []byte) (string, error) {
	p, f, err := s.createTemp(name)
	if err != nil {
		return "", err
	}
	_, werr := f.Write(data)
	synced := false
	if sf, ok := f.(interface{ Sync() error }); ok && werr == nil {
		werr, synced = sf.Sync(), true
	}
	if p, err = s.finishTemp(p, f, werr); err != nil || synced {
		return p, err
	}
	if err := s.syncAll(); err != nil {
		s.fs.Remove(p)
		return "", err
	}
	return p, nil
}
