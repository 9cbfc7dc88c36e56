package bytegroup

import (
	"bytes"
	"errors"
)

// Matches returns nil when enc, coded without a context, decodes to raw,
// and ErrMismatch when it decodes to other bytes: Decode and a compare,
// where the planes of widths 2 and 4 are compared with raw as they are
// joined, never written out (repack decodes every coding so before it
// replaces the raw bytes). buf is scratch for the other widths, grown as
// needed and returned for reuse.
func Matches(buf, enc, raw []byte) ([]byte, error) {
	out, err := decodeTo(buf, enc, len(raw), nil, asIs, raw)
	switch {
	case err != nil:
		return buf, err
	case out == nil: // compared as joined
		return buf, nil
	case !bytes.Equal(out, raw):
		return out[:0], ErrMismatch
	}
	return out[:0], nil
}

// ErrMismatch is Matches' answer for coded bytes that decode to other
// bytes than the raw bytes given.
var ErrMismatch = errors.New("bytegroup: the coded bytes decode to other bytes")
