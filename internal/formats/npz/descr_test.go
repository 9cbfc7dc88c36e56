package npz

import (
	"encoding/binary"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// descrPattern is what simpleDescr reads by hand.
var descrPattern = regexp.MustCompile(`^([<>|=])([biufcmMUSV])([0-9]{1,9})(\[[0-9]*[a-zA-Z]{1,3}\])?$`)

// FuzzSimpleDescr is differential: simpleDescr splits a descr exactly as
// the regular expression it replaced does, or refuses it as that does.
func FuzzSimpleDescr(f *testing.F) {
	for _, s := range []string{"<f4", "|b1", "<c16", ">i8", "=u2", "<U10", "|S5", "<M8[ns]", "<m8[10us]", "<M8[]", "<M8[nsec]",
		"<f", "<f1234567890", "<f123456789", "<x4", "f4", "<O", "<f4[s]", "<M8[s", "<M8[1]", "<M8[é]", "[('a', '<f4')]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, d string) {
		kind, size, unit, ok := simpleDescr(d)
		m := descrPattern.FindStringSubmatch(d)
		if ok != (m != nil) {
			t.Fatalf("simpleDescr(%q) ok = %v, the pattern %v", d, ok, m != nil)
		}
		if ok && (string(kind) != m[2] || size != m[3] || unit != m[4]) {
			t.Fatalf("simpleDescr(%q) = %q %q %q, the pattern %q %q %q", d, kind, size, unit, m[2], m[3], m[4])
		}
	})
}

// npyHeaderByFormat is the header npyHeader makes, written with fmt.
func npyHeaderByFormat(descr string, shape []int64) string {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.FormatInt(d, 10)
	}
	tuple := "(" + strings.Join(dims, ", ") + ")"
	if len(shape) == 1 {
		tuple = "(" + dims[0] + ",)"
	}
	return fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, tuple)
}

// npyHeader writes numpy's dict for a shape of every rank, padded with
// spaces and a newline to a multiple of 64 bytes, in version 1 while the
// dict fits its 16-bit length.
func TestNPYHeaderDict(t *testing.T) {
	for _, tc := range []struct {
		descr   string
		shape   []int64
		version byte
	}{
		{"<f4", nil, 1}, {"<f2", []int64{5}, 1}, {"|b1", []int64{2, 3}, 1}, {"<c16", []int64{0, 1, 9223372036854775807}, 1},
		{"<U10", make([]int64, 30000), 2}, // a dict of 90,000 bytes
	} {
		h := npyHeader(tc.descr, tc.shape)
		want := npyHeaderByFormat(tc.descr, tc.shape)
		pre, hlen := 10, 0
		if h[6] == 1 {
			hlen = int(binary.LittleEndian.Uint16(h[8:]))
		} else {
			pre, hlen = 12, int(binary.LittleEndian.Uint32(h[8:]))
		}
		total := pre + hlen
		if string(h[:6]) != magic || h[6] != tc.version || len(h) != total || total%64 != 0 || h[total-1] != '\n' ||
			strings.TrimRight(string(h[pre:total-1]), " ") != want {
			t.Fatalf("%s %v: header %q…, want version %d and %q", tc.descr, len(tc.shape), h[:min(len(h), 100)], tc.version, want[:min(len(want), 80)])
		}
	}
}
