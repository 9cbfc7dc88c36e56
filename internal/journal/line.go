package journal

import (
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/mstore/mstore/internal/objects"
)

// appendRecord appends r as encoding/json would marshal it, without
// reflection: an add of 100,000 small tensors journals 100,000 packed
// blobs. A string that JSON would escape takes the encoding/json path, so
// the bytes are json.Marshal's in every case (TestRecordEncoding).
func appendRecord(dst []byte, r Record) ([]byte, error) {
	for _, s := range []string{string(r.Op), r.Name, r.Tag, r.Time, r.Msg, r.Pack, r.Enc, r.Members} {
		if !plainJSON(s) {
			v, err := json.Marshal(r)
			return append(dst, v...), err
		}
	}
	dst = append(dst, `{"op":"`...)
	dst = append(dst, r.Op...)
	dst = append(dst, `","b":`...)
	dst = strconv.AppendUint(dst, r.Batch, 10)
	dst = appendString(dst, "name", r.Name)
	dst = appendString(dst, "tag", r.Tag)
	dst = appendDigest(dst, "digest", r.Digest)
	dst = appendString(dst, "time", r.Time)
	dst = appendString(dst, "msg", r.Msg)
	dst = appendInt(dst, "keep", int64(r.Keep))
	dst = appendString(dst, "pack", r.Pack)
	dst = appendInt(dst, "off", r.Offset)
	dst = appendInt(dst, "size", r.Size)
	dst = appendString(dst, "enc", r.Enc)
	dst = appendInt(dst, "raw", r.Raw)
	dst = appendDigest(dst, "base", r.Base)
	dst = appendString(dst, "members", r.Members)
	return append(dst, '}'), nil
}

// plainJSON reports whether s is a JSON string body as it is: printable
// ASCII without the characters encoding/json escapes.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

func appendKey(dst []byte, key string) []byte {
	dst = append(dst, ",\""...)
	dst = append(dst, key...)
	return append(dst, "\":"...)
}

func appendString(dst []byte, key, s string) []byte { // omitempty
	if s == "" {
		return dst
	}
	dst = append(appendKey(dst, key), '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

func appendInt(dst []byte, key string, n int64) []byte { // omitempty
	if n == 0 {
		return dst
	}
	return strconv.AppendInt(appendKey(dst, key), n, 10)
}

func appendDigest(dst []byte, key string, d objects.Digest) []byte { // omitzero
	if d.IsZero() {
		return dst
	}
	dst = append(appendKey(dst, key), '"')
	dst = hex.AppendEncode(dst, d[:])
	return append(dst, '"')
}
