package refs

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// refModel is what refs should hold, kept in memory.
type refModel struct {
	history map[string][]Entry // oldest first
	tags    map[[2]string]objects.Digest
	retired map[[2]string]objects.Digest // removed tags: they may only come back at the same digest
}

// TestRefsAgainstModel drives random moves, tags, removals and trims against
// the bbolt-backed refs and an in-memory model, and compares every read.
func TestRefsAgainstModel(t *testing.T) {
	dir := t.TempDir()
	run := 0
	names := []string{"a", "a/b", "b", "12345678"}
	tagNames := []string{"v1", "v2"}
	digests := make([]objects.Digest, 5)
	for i := range digests {
		digests[i] = dig(i)
	}
	digests[4] = hexDigest(t, "12345678", 'f') // a digest prefix that is also a name

	rapid.Check(t, func(rt *rapid.T) {
		run++
		db, err := bolt.Open(filepath.Join(dir, fmt.Sprintf("%d.db", run)), 0o600, &bolt.Options{Timeout: time.Second, NoSync: true})
		if err != nil {
			rt.Fatal(err)
		}
		rt.Cleanup(func() { db.Close() })
		m := refModel{history: map[string][]Entry{}, tags: map[[2]string]objects.Digest{}, retired: map[[2]string]objects.Digest{}}
		clock := t0
		nextSeq := map[string]uint64{}

		wantErr := func(err error, class errs.Class, what string) {
			if class == 0 && err != nil || class != 0 && !errors.Is(err, class) {
				rt.Fatalf("%s: got %v, want class %v", what, err, class.Key())
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"move": func(rt *rapid.T) {
				name := rapid.SampledFrom(names).Draw(rt, "name")
				d := rapid.SampledFrom(digests).Draw(rt, "digest")
				clock = clock.Add(time.Second)
				var got Entry
				err := db.Update(func(tx *bolt.Tx) (err error) {
					got, err = Move(tx, name, d, "msg "+clock.String(), clock)
					return err
				})
				wantErr(err, 0, "move")
				h := m.history[name]
				if len(h) > 0 && h[len(h)-1].Digest == d {
					if got != h[len(h)-1] {
						rt.Fatalf("no-op move returned %+v, want %+v", got, h[len(h)-1])
					}
					return
				}
				if len(h) == 0 {
					nextSeq[name] = 0
				}
				nextSeq[name]++
				var prev objects.Digest
				if len(h) > 0 {
					prev = h[len(h)-1].Digest
				}
				want := Entry{Seq: nextSeq[name], Digest: d, Previous: prev, Message: "msg " + clock.String(), Time: clock}
				if got != want {
					rt.Fatalf("move returned %+v, want %+v", got, want)
				}
				m.history[name] = append(h, want)
			},
			"tag": func(rt *rapid.T) {
				k := [2]string{rapid.SampledFrom(names).Draw(rt, "name"), rapid.SampledFrom(tagNames).Draw(rt, "tag")}
				d := rapid.SampledFrom(digests).Draw(rt, "digest")
				var created bool
				err := db.Update(func(tx *bolt.Tx) (err error) {
					created, err = Tag(tx, k[0], k[1], d)
					return err
				})
				old, exists := m.tags[k]
				was, isRetired := m.retired[k]
				switch {
				case !exists && isRetired && was != d:
					wantErr(err, errs.Conflict, "removed tag at another digest")
					return
				case !exists:
					wantErr(err, 0, "new tag")
					m.tags[k] = d
					delete(m.retired, k)
				case old == d:
					wantErr(err, 0, "same tag")
				default:
					wantErr(err, errs.Conflict, "moved tag")
				}
				if created != !exists {
					rt.Fatalf("created = %v for a tag that exists = %v", created, exists)
				}
			},
			"removeRef": func(rt *rapid.T) {
				name := rapid.SampledFrom(names).Draw(rt, "name")
				err := db.Update(func(tx *bolt.Tx) error { return RemoveRef(tx, name) })
				if _, ok := m.history[name]; !ok {
					wantErr(err, errs.NotFound, "remove missing ref")
					return
				}
				wantErr(err, 0, "remove ref")
				delete(m.history, name)
			},
			"removeTag": func(rt *rapid.T) {
				k := [2]string{rapid.SampledFrom(names).Draw(rt, "name"), rapid.SampledFrom(tagNames).Draw(rt, "tag")}
				err := db.Update(func(tx *bolt.Tx) error { return RemoveTag(tx, k[0], k[1]) })
				if _, ok := m.tags[k]; !ok {
					wantErr(err, errs.NotFound, "remove missing tag")
					return
				}
				wantErr(err, 0, "remove tag")
				m.retired[k] = m.tags[k]
				delete(m.tags, k)
			},
			"trim": func(rt *rapid.T) {
				name := rapid.SampledFrom(names).Draw(rt, "name")
				keep := rapid.IntRange(-1, 4).Draw(rt, "keep")
				var removed int
				err := db.Update(func(tx *bolt.Tx) (err error) {
					removed, err = TrimHistory(tx, name, keep)
					return err
				})
				h, ok := m.history[name]
				if !ok {
					wantErr(err, errs.NotFound, "trim missing ref")
					return
				}
				wantErr(err, 0, "trim")
				drop := max(len(h)-max(keep, 1), 0)
				if removed != drop {
					rt.Fatalf("trim removed %d, want %d", removed, drop)
				}
				m.history[name] = h[drop:]
			},
			"": func(rt *rapid.T) {
				if err := db.View(func(tx *bolt.Tx) error { return m.check(rt, tx, names, tagNames, digests) }); err != nil {
					rt.Fatal(err)
				}
			},
		})
	})
}

// check compares every read of refs with the model.
func (m refModel) check(rt *rapid.T, tx *bolt.Tx, names, tagNames []string, digests []objects.Digest) error {
	if err := Check(tx); err != nil {
		return err
	}
	var wantList []Ref
	wantRefd := map[objects.Digest]bool{}
	for _, name := range slices.Sorted(maps.Keys(m.history)) {
		h := m.history[name]
		last := h[len(h)-1]
		wantList = append(wantList, Ref{Name: name, Current: last.Digest, Entries: len(h), Moved: last.Time})
		for _, e := range h {
			wantRefd[e.Digest] = true
		}
	}
	var wantTags []TagRef
	for k, d := range m.tags {
		wantTags = append(wantTags, TagRef{Name: k[0], Tag: k[1], Digest: d})
		wantRefd[d] = true
	}
	slices.SortFunc(wantTags, func(a, b TagRef) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Tag, b.Tag))
	})

	list, err := List(tx)
	if err != nil || !reflect.DeepEqual(list, wantList) {
		rt.Fatalf("List = %+v, %v; want %+v", list, err, wantList)
	}
	tags, err := Tags(tx)
	if err != nil || !reflect.DeepEqual(tags, wantTags) {
		rt.Fatalf("Tags = %+v, %v; want %+v", tags, err, wantTags)
	}
	refd, err := Referenced(tx)
	if err != nil || !reflect.DeepEqual(refd, wantRefd) {
		rt.Fatalf("Referenced = %v, %v; want %v", refd, err, wantRefd)
	}
	manifests := fakeManifests(digests)

	for _, name := range names {
		h, exists := m.history[name]
		got, err := History(tx, name)
		if !exists {
			if !errors.Is(err, errs.NotFound) {
				rt.Fatalf("History(%s) of a missing ref: %v", name, err)
			}
		} else {
			want := slices.Clone(h)
			slices.Reverse(want)
			if err != nil || !reflect.DeepEqual(got, want) {
				rt.Fatalf("History(%s) = %+v, %v; want %+v", name, got, err, want)
			}
		}
		resolve := func(s string) (objects.Digest, error) {
			spec, err := ParseSpec(s)
			if err != nil {
				rt.Fatalf("ParseSpec(%q): %v", s, err)
			}
			return Resolve(tx, spec, manifests)
		}
		// NAME and NAME~N walk the model's history back.
		for n := 0; n <= len(h)+1; n++ {
			s := fmt.Sprintf("%s~%d", name, n)
			d, err := resolve(s)
			if n < len(h) {
				if want := h[len(h)-1-n].Digest; err != nil || d != want {
					rt.Fatalf("%s = %s, %v; want %s", s, d.Short(), err, want.Short())
				}
			} else if !errors.Is(err, errs.NotFound) {
				rt.Fatalf("%s beyond history: %v", s, err)
			}
		}
		if d, err := resolve(name); exists && (err != nil || d != h[len(h)-1].Digest) || !exists && name != "12345678" && !errors.Is(err, errs.NotFound) {
			rt.Fatalf("%s = %s, %v", name, d.Short(), err)
		}
		// NAME@DIGEST holds exactly the digests of the kept history.
		for _, d := range digests {
			got, err := resolve(name + "@" + d.String())
			if slices.ContainsFunc(h, func(e Entry) bool { return e.Digest == d }) {
				if err != nil || got != d {
					rt.Fatalf("%s@%s = %s, %v", name, d.Short(), got.Short(), err)
				}
			} else if !errors.Is(err, errs.NotFound) {
				rt.Fatalf("%s@%s outside history: %v", name, d.Short(), err)
			}
		}
		for _, tg := range tagNames {
			want, ok := m.tags[[2]string{name, tg}]
			got, err := resolve(name + ":" + tg)
			if ok && (err != nil || got != want) || !ok && !errors.Is(err, errs.NotFound) {
				rt.Fatalf("%s:%s = %s, %v", name, tg, got.Short(), err)
			}
		}
	}
	// The ref named 12345678 wins over the digest with that prefix.
	d, err := Resolve(tx, Spec{Kind: KindDigest, Name: "12345678", Digest: "12345678"}, manifests)
	want := digests[4]
	if h, ok := m.history["12345678"]; ok {
		want = h[len(h)-1].Digest
	}
	if err != nil || d != want {
		rt.Fatalf("12345678 = %s, %v; want %s", d.Short(), err, want.Short())
	}
	return nil
}
