package transfer

import (
	"os"
	"sort"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/store"
)

// Named is a remote recorded with `mstore remote add`.
type Named struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

func checkRemoteName(name string) error {
	ok := name != "" && len(name) <= 64
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || (i > 0 && (c == '.' || c == '_' || c == '-'))
	}
	if !ok {
		return errs.New(errs.SchemaError, "remote", "remote name %q: want a letter or digit, then letters, digits, '.', '_' or '-' (at most 64)", name)
	}
	return nil
}

// AddRemote records name as u in st; a name already used is a conflict.
func AddRemote(st *store.Store, name, u string) error {
	if err := checkRemoteName(name); err != nil {
		return err
	}
	if Kind(u) == "path" && !strings.HasPrefix(u, "file://") && strings.Contains(u, "://") {
		return errs.New(errs.SchemaError, "remote", "%q: unknown kind of remote (want a path, file://, http(s)://, s3:// or oci://)", u)
	}
	return st.Update(func(tx *bolt.Tx) error {
		if old, ok := store.Remotes(tx)[name]; ok {
			return errs.New(errs.Conflict, "remote", "remote %q already names %s (remove it first with `mstore remote rm %s`)", name, old, name)
		}
		return store.PutRemote(tx, name, u)
	})
}

// RemoveRemote forgets name; an unknown one is not_found.
func RemoveRemote(st *store.Store, name string) error {
	return st.Update(func(tx *bolt.Tx) error {
		ok, err := store.RemoveRemote(tx, name)
		if err == nil && !ok {
			err = errs.New(errs.NotFound, "remote", "no remote %q (see `mstore remote ls`)", name)
		}
		return err
	})
}

// ListRemotes returns the named remotes by name.
func ListRemotes(st *store.Store) ([]Named, error) {
	var out []Named
	err := st.View(func(tx *bolt.Tx) error {
		for n, u := range store.Remotes(tx) {
			out = append(out, Named{Name: n, URL: u})
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// Lookup returns the URL of a remote named by arg: a name recorded in st
// (st may be nil), else arg itself.
func Lookup(st *store.Store, arg string) (string, error) {
	if st != nil && checkRemoteName(arg) == nil {
		var u string
		err := st.View(func(tx *bolt.Tx) error {
			u = store.Remotes(tx)[arg]
			return nil
		})
		if err != nil {
			return "", err
		}
		if u != "" {
			return u, nil
		}
	}
	return arg, nil
}

// Token reads the bearer token from file, else from $MSTORE_TOKEN.
func Token(file string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv("MSTORE_TOKEN")), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", errs.New(errs.SchemaError, "remote", "token file %s is empty", file)
	}
	return t, nil
}
