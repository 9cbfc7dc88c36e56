package strictjson_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/formats/strictjson"
)

// member is one top-level member as a reader read it.
type member struct {
	key   string
	at    int64
	value any
}

// readMembers reads b, a JSON object, as parts cut at cuts (none: whole,
// by Object), each with a Reader of its own at its file offset.
func readMembers(b []byte, cuts []int) ([]member, error) {
	var out []member
	bounds := append(append([]int{-1}, cuts...), len(b))
	for i := range len(bounds) - 1 {
		from, to := bounds[i]+1, bounds[i+1]
		r, err := strictjson.New(b[from:to], int64(from), "test", "f.json")
		if err != nil {
			return nil, err
		}
		read := func(key string, at int64) error {
			v, err := decode(r)
			out = append(out, member{key, at, v})
			return err
		}
		first, last := i == 0, i == len(bounds)-2
		if first && last {
			err = r.Object(read)
		} else {
			err = r.Members(read, first, last)
		}
		if err == nil && last {
			err = r.End()
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// topCommas are the offsets of the commas between b's top-level members,
// as a whole read finds them.
func topCommas(b []byte) []int {
	var out []int
	r, err := strictjson.New(b, 0, "test", "f.json")
	if err != nil || r.Peek() != '{' {
		return nil
	}
	r.Object(func(string, int64) error {
		_, err := decode(r)
		if r.Peek() == ',' {
			out = append(out, int(r.Offset()))
		}
		return err
	})
	return out
}

// checkMembers: cut at any one comma, parts that read give the members
// the whole gives (and never read what it refuses); cut at a top-level
// comma, an object that reads whole reads in parts. (Cut at white space
// between two members that lack their comma, both parts read: the cut
// must be a comma, which is the caller's to see to.)
func checkMembers(t *testing.T, b []byte) {
	want, werr := readMembers(b, nil)
	top := map[int]bool{}
	for _, at := range topCommas(b) {
		top[at] = true
	}
	for at, c := range b {
		if c != ',' {
			continue
		}
		got, err := readMembers(b, []int{at})
		switch {
		case err == nil && werr != nil:
			t.Fatalf("cut at %d: parts read %q, which is refused whole: %v", at, b, werr)
		case err == nil && !reflect.DeepEqual(got, want):
			t.Fatalf("cut at %d of %q: parts read %#v, whole %#v", at, b, got, want)
		case err != nil && werr == nil && top[at]:
			t.Fatalf("cut at top-level comma %d of %q: %v", at, b, err)
		}
	}
	if cuts := topCommas(b); werr == nil && len(cuts) > 1 {
		got, err := readMembers(b, cuts)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("cut at every top-level comma %v of %q: %#v, %v", cuts, b, got, err)
		}
	}
}

func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, "b": 1, "c": null}`,
		`{"__metadata__": {"format": "pt"}, "b\u00e9\"\\/\b\f\n\r\t": [1.5e3, -0, true, false, null], "c},\"": "},\""}`,
		`{ "a" : 1 , "b" : [ 2 , 3 ] , "c" : "x" }  `, `{"a":1 "b":2}`, `{"a":1,,"b":2}`, `{"a":1,}`, `{}`,
		`{"a":{},"b":{}}}`, `{"a":1},"b":2}`, `{"a":tru,"b":nul}`, `{"a":1,"b":2`, `{"a":"\ud83d","b":"\ude00"}`,
		// Nested to MaxDepth in the second part: one level too deep, as
		// the whole counts it.
		`{"a":1,"b":` + strings.Repeat("[", strictjson.MaxDepth) + strings.Repeat("]", strictjson.MaxDepth) + `}`,
		`{"a":1,"b":` + strings.Repeat("[", strictjson.MaxDepth-1) + strings.Repeat("]", strictjson.MaxDepth-1) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 4096 {
			return // every cut reads it again
		}
		checkMembers(t, b)
	})
}
