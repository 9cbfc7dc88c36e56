package refs

import (
	"strconv"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// Kind says which form a version name takes. Its zero value is invalid.
type Kind int

const (
	_ Kind = iota
	// KindRef is NAME: the ref's current target.
	KindRef
	// KindTag is NAME:TAG.
	KindTag
	// KindPinned is NAME@DIGEST: a digest (or prefix) that must be in NAME's
	// history.
	KindPinned
	// KindDigest is a bare digest or digest prefix. The same string is also a
	// valid name; Resolve prefers a ref of that name when one exists.
	KindDigest
	// KindBack is NAME~N: N moves back in NAME's history.
	KindBack
)

// Spec is a parsed version name. Build one with ParseSpec.
type Spec struct {
	Kind Kind
	// Name is the ref's name. For KindDigest it holds the digest string too,
	// since a bare hex string is also a valid name.
	Name string
	// Tag is set for KindTag.
	Tag string
	// Digest is 8 to 64 lowercase hex digits, for KindPinned and KindDigest.
	Digest string
	// Back is N for KindBack; 0 means the current target.
	Back int
}

// ParseSpec parses a version name:
//
//	NAME          the ref's current target
//	NAME:TAG      a tag
//	NAME@DIGEST   a digest, or a prefix of 8+ hex digits, in NAME's history
//	DIGEST        a digest or a prefix of 8+ hex digits (lowercase)
//	NAME~N        N moves back in NAME's history; NAME~ is NAME~1
//
// A DIGEST may also be written blake3:HEX, as people paste digests (see
// pastedDigests).
//
// Malformed input is a schema_error. ParseSpec(s.String()) gives back s.
func ParseSpec(s string) (Spec, error) {
	bad := func(format string, args ...any) (Spec, error) {
		return Spec{}, errs.New(errs.SchemaError, pkg, "version name %q: "+format, append([]any{s}, args...)...)
	}
	if s == "" {
		return bad("empty (want NAME, NAME:TAG, NAME@DIGEST, DIGEST or NAME~N)")
	}
	s, err := pastedDigests(s)
	if err != nil {
		return Spec{}, err
	}
	if i := strings.IndexAny(s, "@:~"); i >= 0 {
		name := s[:i]
		if reason := nameProblem(name); reason != "" {
			return bad("name %q: %s", name, reason)
		}
		rest := s[i+1:]
		switch s[i] {
		case '@':
			if !objects.IsDigestPrefix(rest) {
				return bad("after '@': want 8 to 64 lowercase hex digits, got %q", rest)
			}
			return Spec{Kind: KindPinned, Name: name, Digest: rest}, nil
		case ':':
			if reason := tagProblem(rest); reason != "" {
				return bad("tag %q: %s", rest, reason)
			}
			return Spec{Kind: KindTag, Name: name, Tag: rest}, nil
		default: // '~'
			if rest == "" {
				return Spec{Kind: KindBack, Name: name, Back: 1}, nil
			}
			for j := 0; j < len(rest); j++ {
				if rest[j] < '0' || rest[j] > '9' {
					return bad("after '~': want a number of moves, got %q", rest)
				}
			}
			n, err := strconv.Atoi(rest)
			if err != nil {
				return bad("after '~': %q is too large", rest)
			}
			return Spec{Kind: KindBack, Name: name, Back: n}, nil
		}
	}
	if objects.IsDigestPrefix(s) {
		return Spec{Kind: KindDigest, Name: s, Digest: s}, nil
	}
	if reason := nameProblem(s); reason != "" {
		return bad("%s", reason)
	}
	return Spec{Kind: KindRef, Name: s}, nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return s != ""
}

// String is the canonical text of s; ParseSpec reads it back.
func (s Spec) String() string {
	switch s.Kind {
	case KindRef:
		return s.Name
	case KindTag:
		return s.Name + ":" + s.Tag
	case KindPinned:
		return s.Name + "@" + s.Digest
	case KindDigest:
		return s.Digest
	case KindBack:
		return s.Name + "~" + strconv.Itoa(s.Back)
	}
	return "<invalid version name>"
}
