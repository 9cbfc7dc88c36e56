package refs

import (
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

func TestResolve(t *testing.T) {
	db := openDB(t)
	// Digests with controlled prefixes, so prefixes can be made ambiguous.
	var (
		a1 = hexDigest(t, "aaaa1111", '0')
		a2 = hexDigest(t, "aaaa2222", '0')
		a3 = hexDigest(t, "aaaa2222", '1') // shares the prefix aaaa2222 with a2
		b1 = hexDigest(t, "bbbb1111", '0')
		c1 = hexDigest(t, "cccc1111", '0') // a manifest in no history
		e1 = hexDigest(t, "12345678", 'e') // the current target of the ref named 12345678
	)
	manifests := fakeManifests{a1, a2, a3, b1, c1, e1}
	move(t, db, "acme/m", a1, "one")
	move(t, db, "acme/m", a2, "two")
	move(t, db, "acme/m", b1, "three")
	move(t, db, "acme/m", a3, "four")
	move(t, db, "other", c1, "")
	move(t, db, "12345678", e1, "") // a ref whose name is also a digest prefix
	tag(t, db, "acme/m", "v1", a1)
	tag(t, db, "acme/m", "v2", a2)

	for _, tc := range []struct {
		spec  string
		want  objects.Digest
		class errs.Class
		msg   []string
	}{
		{spec: "acme/m", want: a3},
		{spec: "acme/m~0", want: a3},
		{spec: "acme/m~", want: b1},
		{spec: "acme/m~1", want: b1},
		{spec: "acme/m~3", want: a1},
		{spec: "acme/m~4", class: errs.NotFound, msg: []string{"acme/m~4", "4 entries", "mstore log acme/m"}},
		{spec: "acme/m~999999999999", class: errs.NotFound, msg: []string{"4 entries"}},
		{spec: "acme/m:v1", want: a1},
		{spec: "acme/m:v2", want: a2},
		{spec: "acme/m:v3", class: errs.NotFound, msg: []string{"acme/m:v3", "v1, v2"}},
		{spec: "other:v1", class: errs.NotFound, msg: []string{"other:v1", "no tags", "mstore ls"}},
		{spec: "acme/m@" + a1.String(), want: a1},
		{spec: "acme/m@bbbb1111", want: b1},
		{spec: "acme/m@aaaa1", class: errs.SchemaError}, // too short to parse
		{spec: "acme/m@aaaa1111", want: a1},
		{spec: "acme/m@aaaa2222", class: errs.NotFound, msg: []string{"ambiguous", "aaaa2222", "2 versions", a2.String()[:12], a3.String()[:12], "history of acme/m"}},
		// The pinned pull: a manifest that exists but is not in the history.
		{spec: "acme/m@cccc1111", class: errs.NotFound, msg: []string{"cccc1111", `not in the history of "acme/m"`, "mstore log acme/m"}},
		{spec: "acme/m@" + c1.String(), class: errs.NotFound, msg: []string{"not in the history"}},
		{spec: "nope@aaaa1111", class: errs.NotFound, msg: []string{`no ref "nope"`, "mstore ls"}},
		{spec: "cccc1111", want: c1},
		{spec: c1.String(), want: c1},
		{spec: "bbbb1111", want: b1},
		{spec: "aaaa2222", class: errs.NotFound, msg: []string{"ambiguous", "this store", a2.String()[:12], a3.String()[:12]}},
		{spec: "aaaa1111" + strings.Repeat("0", 56), want: a1},
		{spec: "dddd1111", class: errs.NotFound, msg: []string{"no version dddd1111", "mstore ls"}},
		{spec: "dddd1111" + strings.Repeat("0", 56), class: errs.NotFound, msg: []string{"no version"}},
		{spec: "12345678", want: e1},  // the ref wins over the digest prefix
		{spec: "12345678e", want: e1}, // no such ref: the digest prefix
		{spec: "1234567", class: errs.NotFound, msg: []string{`no ref "1234567"`, "at least 8 hex digits"}},
		{spec: "nope", class: errs.NotFound, msg: []string{`no ref "nope"`, "mstore ls"}},
		{spec: "nope~1", class: errs.NotFound, msg: []string{`no ref "nope"`}},
		{spec: "nope:v1", class: errs.NotFound, msg: []string{"nope:v1"}},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			spec, err := ParseSpec(tc.spec)
			if err != nil {
				wantClass(t, err, tc.class)
				return
			}
			view(t, db, func(tx *bolt.Tx) error {
				got, err := Resolve(tx, spec, manifests)
				if tc.class != 0 {
					wantClass(t, err, tc.class, tc.msg...)
					return nil
				}
				if err != nil || got != tc.want {
					t.Fatalf("got %s, %v; want %s", got.Short(), err, tc.want.Short())
				}
				return nil
			})
		})
	}
}

func TestResolveRefusesHandMadeSpecs(t *testing.T) {
	db := openDB(t)
	view(t, db, func(tx *bolt.Tx) error {
		for _, s := range []Spec{
			{},
			{Kind: KindRef, Name: "a/../b"},
			{Kind: KindTag, Name: "m"},
			{Kind: KindPinned, Name: "m", Digest: "XYZ"},
			{Kind: KindDigest, Digest: "deadbeef"}, // Name not set
			{Kind: KindBack, Name: "m", Back: -1},
		} {
			_, err := Resolve(tx, s, nil)
			wantClass(t, err, errs.SchemaError)
		}
		return nil
	})
}

func TestAmbiguousPrefixListsDistinguishingDigits(t *testing.T) {
	// Two digests sharing 20 digits are shown with 21.
	x := hexDigest(t, strings.Repeat("ab", 10)+"1", '0')
	y := hexDigest(t, strings.Repeat("ab", 10)+"2", '0')
	err := ambiguous("abababab", []objects.Digest{y, x}, "this store")
	wantClass(t, err, errs.NotFound, x.String()[:21]+", "+y.String()[:21])
	if strings.Contains(err.Error(), x.String()[:22]) {
		t.Errorf("candidates longer than needed: %v", err)
	}
	// Many candidates are cut short.
	var many []objects.Digest
	for i := range 15 {
		many = append(many, hexDigest(t, "abababab"+string("0123456789abcdef"[i]), '0'))
	}
	err = ambiguous("abababab", many, "this store")
	wantClass(t, err, errs.NotFound, "15 versions", "and 5 more")
}
