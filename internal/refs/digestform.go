package refs

import (
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// Algorithm prefixes of pasted digests. mstore's digests are BLAKE3: a
// digest written blake3:HEX (OCI and ModelPack spell digests that way) is
// the bare HEX, and a sha256:HEX (what Hugging Face, Ollama and docker
// show) cannot name a version here at all.
const (
	blake3Prefix = "blake3:"
	sha256Prefix = "sha256:"
)

// pastedDigests rewrites blake3:HEX, alone or after NAME@, to the bare hex
// (lowercased, as hex is case-blind), and refuses sha256:HEX with what to
// use instead. "blake3" is also a valid ref name; a tag of it that looks
// like a digest (blake3:0123abcd) is read as the digest, never as the tag.
func pastedDigests(s string) (string, error) {
	head, digest := "", s
	if i := strings.IndexByte(s, '@'); i >= 0 {
		head, digest = s[:i+1], s[i+1:]
	}
	lower := strings.ToLower(digest)
	switch {
	case strings.HasPrefix(lower, blake3Prefix) && objects.IsDigestPrefix(lower[len(blake3Prefix):]):
		return head + lower[len(blake3Prefix):], nil
	case strings.HasPrefix(lower, sha256Prefix):
		return "", errs.New(errs.SchemaError, pkg, "version name %q: mstore's digests are BLAKE3 (blake3:HEX, or the bare HEX), not sha256; "+
			"a sha256 names one file's bytes: `mstore show --sha256 REF` prints each file's sha256, and `mstore ls` the versions", s)
	}
	return s, nil
}
