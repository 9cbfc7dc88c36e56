package ociremote

import (
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/refs"
)

const pkg = "ociremote"

// Scheme starts every URL of this remote.
const Scheme = "oci://"

// IsURL reports whether u names an OCI registry remote.
func IsURL(u string) bool { return strings.HasPrefix(u, Scheme) }

// Ref is a parsed oci:// URL.
type Ref struct {
	Host   string        // HOST[:PORT]
	Repo   string        // the repository path
	Tag    string        // "" when none
	Digest digest.Digest // "" when none
}

// Reference is what the registry is asked for: the digest, else the tag,
// else "latest".
func (r Ref) Reference() string {
	switch {
	case r.Digest != "":
		return r.Digest.String()
	case r.Tag != "":
		return r.Tag
	}
	return "latest"
}

func (r Ref) String() string {
	s := Scheme + r.Host + "/" + r.Repo
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest.String()
	}
	return s
}

// Parse reads oci://HOST[:PORT]/REPO[:TAG][@sha256:HEX].
func Parse(u string) (Ref, error) {
	bad := func(why string) (Ref, error) {
		return Ref{}, errs.New(errs.SchemaError, pkg, "%q: %s (want oci://HOST[:PORT]/REPO[:TAG|@sha256:HEX])", u, why)
	}
	if !IsURL(u) {
		return bad("not an oci:// URL")
	}
	rest := strings.TrimPrefix(u, Scheme)
	host, path, ok := strings.Cut(rest, "/")
	if !ok || host == "" || path == "" {
		return bad("no repository")
	}
	var r Ref
	r.Host = host
	if strings.ContainsAny(host, "@?#") {
		return bad("a host with credentials or a query")
	}
	if p, d, ok := strings.Cut(path, "@"); ok {
		dg, err := digest.Parse(d)
		if err != nil || dg.Algorithm() != digest.SHA256 {
			return bad("a pin must be @sha256: and 64 hex digits")
		}
		r.Digest, path = dg, p
	}
	if i := strings.LastIndexByte(path, ':'); i >= 0 && !strings.Contains(path[i:], "/") {
		r.Tag, path = path[i+1:], path[:i]
		if !validTag(r.Tag) {
			return bad("a tag is 1-128 letters, digits, '_', '.' or '-', not starting with '.' or '-'")
		}
	}
	if !validRepo(path) {
		return bad("a repository is lowercase path components of letters, digits and '.', '_', '-' separators")
	}
	if _, err := refs.ParseName(path); err != nil {
		return bad("the repository is not a valid mstore name")
	}
	r.Repo = path
	return r, nil
}

// validTag is the distribution spec's [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}.
func validTag(t string) bool {
	if t == "" || len(t) > 128 || t[0] == '.' || t[0] == '-' {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// validRepo is the distribution spec's
// [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(\/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*,
// checked component by component (separators not leading or trailing).
func validRepo(p string) bool {
	if p == "" || len(p) > 255 {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || !alnum(c[0]) || !alnum(c[len(c)-1]) {
			return false
		}
		for i := 0; i < len(c); i++ {
			if !alnum(c[i]) && c[i] != '.' && c[i] != '_' && c[i] != '-' {
				return false
			}
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
