package mpk

import (
	"path"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
)

// archiveSuffix is the one accepted archive name ending.
const archiveSuffix = ".tar.gz"

// lookalikeSuffixes are the endings Claims also takes (in any case), so that
// an archive under a wrong name is refused as invalid_archive rather than
// passed over as "no model".
var lookalikeSuffixes = []string{".tar.gz", ".mpk", ".tgz", ".tar", ".gz"}

func claims(p string) bool {
	lower := strings.ToLower(path.Base(p))
	for _, s := range lookalikeSuffixes {
		if strings.HasSuffix(lower, s) {
			return true
		}
	}
	return false
}

// CheckName refuses (invalid_archive) an archive whose file name does not
// end in a lowercase ".tar.gz": ".mpk", ".tgz", ".tar", ".gz" and
// ".TAR.GZ" alike are refused before the stream is read.
func CheckName(name string) error {
	base := path.Base(name)
	if strings.HasSuffix(base, archiveSuffix) && len(base) > len(archiveSuffix) {
		return nil
	}
	return errs.New(errs.InvalidArchive, pkg, "%s: an MPK archive must be named *.tar.gz (lowercase); .mpk, .tgz, .tar, .gz and other cases are refused", name)
}

// The classes of extracted files: a regular file's name ending says which
// folder of the extraction root it lands in.
var classDirs = []struct{ suffix, dir string }{
	{".json", "etc"},
	{".so", "lib"},
	{".elf", "share"},
}

// Target returns where the member named name is extracted:
// CLASSDIR/BASENAME. A name that is not a safe member path is
// path_traversal; a file of no class is schema_error.
func Target(name string) (string, error) {
	if !formats.IsMemberPath(name) {
		return "", errs.New(errs.PathTraversal, pkg, "member %q: %s", name, unsafeReason(name))
	}
	base := path.Base(name)
	for _, c := range classDirs {
		if strings.HasSuffix(base, c.suffix) && len(base) > len(c.suffix) {
			return c.dir + "/" + base, nil
		}
	}
	return "", errs.New(errs.SchemaError, pkg, "member %q is of no file class this build extracts (*.json → etc/, *.so → lib/, *.elf → share/)", name)
}

// memberName normalises the name of a tar entry: leading "./" segments
// are dropped, and a directory's trailing "/". The archive's own top
// directory ("./") gives "". Anything else that is not then a safe member
// path (formats.IsMemberPath) is path_traversal.
func memberName(raw string, dir bool) (string, error) {
	if !utf8.ValidString(raw) {
		return "", errs.New(errs.PathTraversal, pkg, "entry name %q is not valid UTF-8", raw)
	}
	name := raw
	if dir {
		name = strings.TrimSuffix(name, "/")
	}
	for strings.HasPrefix(name, "./") {
		name = name[2:]
	}
	if dir && (name == "" || name == ".") {
		return "", nil
	}
	if !formats.IsMemberPath(name) {
		return "", errs.New(errs.PathTraversal, pkg, "entry name %q: %s", raw, unsafeReason(name))
	}
	return name, nil
}

// unsafeReason says, for a message, why p is not a safe member path. The
// decision itself is formats.IsMemberPath's.
func unsafeReason(p string) string {
	switch {
	case !utf8.ValidString(p):
		return "not valid UTF-8"
	case strings.HasPrefix(p, "/"):
		return "an absolute path"
	case strings.Contains(p, ":"):
		return "a drive prefix or stream name (':')"
	case strings.Contains(p, `\`):
		return "a backslash (a Windows separator)"
	case strings.ContainsAny(p, "\u2044\u2215\u29f8\uff0f\u2216\u29f9\ufe68\uff3c"):
		return "a Unicode look-alike of a slash or backslash"
	}
	for _, seg := range strings.Split(p, "/") {
		switch {
		case seg == "..":
			return "a '..' segment leaves the archive"
		case seg != "" && strings.Trim(seg, ".\u2024\u2025\ufe52\uff0e") == "":
			return "a segment of dots or Unicode look-alikes of dots"
		}
	}
	return "not a clean relative path (empty or '.' segment, doubled slash, NUL)"
}

// foldKey is the key under which two extraction targets count as the same
// path: Unicode NFC and lower case, since common filesystems (macOS,
// Windows) do not tell such names apart.
func foldKey(target string) string {
	return strings.ToLower(norm.NFC.String(target))
}
