package refs

import (
	"strconv"
	"strings"

	"github.com/mstore/mstore/internal/errs"
)

const (
	// MaxNameLen is the longest name, in bytes.
	MaxNameLen = 200
	// MaxTagLen is the longest tag, in bytes.
	MaxTagLen = 128
)

// ParseName checks that s is a valid model name and returns it unchanged.
//
// A name is one or more components separated by single slashes. Each
// component starts with an ASCII letter or digit, continues with letters,
// digits, '.', '_' or '-', and never contains "..". The whole name is at most
// MaxNameLen bytes. Names are case-sensitive. '@', ':' and '~' never appear in
// a name, so a version name (see ParseSpec) splits without ambiguity; and a
// valid name is always a clean relative slash path.
func ParseName(s string) (string, error) {
	if reason := nameProblem(s); reason != "" {
		return "", errs.New(errs.SchemaError, pkg, "name %q: %s", s, reason)
	}
	return s, nil
}

// ValidName reports whether ParseName accepts s.
func ValidName(s string) bool { return nameProblem(s) == "" }

// ParseTag checks that s is a valid tag and returns it unchanged: an ASCII
// letter, digit or '_', then up to MaxTagLen-1 letters, digits, '.', '_' or
// '-'.
func ParseTag(s string) (string, error) {
	if reason := tagProblem(s); reason != "" {
		return "", errs.New(errs.SchemaError, pkg, "tag %q: %s", s, reason)
	}
	return s, nil
}

// ValidTag reports whether ParseTag accepts s.
func ValidTag(s string) bool { return tagProblem(s) == "" }

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isNameByte(c byte) bool { return isAlnum(c) || c == '.' || c == '_' || c == '-' }

// nameProblem says what is wrong with s as a name, or "" if nothing is.
func nameProblem(s string) string {
	switch {
	case s == "":
		return "empty name"
	case len(s) > MaxNameLen:
		return "longer than 200 bytes"
	case strings.HasPrefix(s, "/"):
		return "starts with '/'"
	case strings.HasSuffix(s, "/"):
		return "ends with '/'"
	}
	for _, comp := range strings.Split(s, "/") {
		if comp == "" {
			return "empty component (\"//\")"
		}
		if !isAlnum(comp[0]) {
			return "component " + strconv.Quote(comp) + " must start with a letter or digit"
		}
		for i := 1; i < len(comp); i++ {
			if c := comp[i]; !isNameByte(c) {
				return "character " + strconv.Quote(comp[i:i+1]) + " not allowed (use letters, digits, '.', '_', '-' and '/')"
			}
		}
		if strings.Contains(comp, "..") {
			return "component " + strconv.Quote(comp) + " contains \"..\""
		}
	}
	return ""
}

func tagProblem(s string) string {
	switch {
	case s == "":
		return "empty tag"
	case len(s) > MaxTagLen:
		return "longer than 128 bytes"
	case !isAlnum(s[0]) && s[0] != '_':
		return "must start with a letter, digit or '_'"
	}
	for i := 1; i < len(s); i++ {
		if !isNameByte(s[i]) {
			return "character " + strconv.Quote(s[i:i+1]) + " not allowed (use letters, digits, '.', '_', '-')"
		}
	}
	return ""
}
