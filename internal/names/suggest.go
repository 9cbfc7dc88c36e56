package names

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
)

// maxSuggestions bounds a "did you mean" list: a hint, not a listing.
const maxSuggestions = 3

// Nearest returns up to three candidates closest to want by edit distance,
// nearest first, among those close enough to be a plausible typo (at most
// a third of want's length, and at least 1, edits away, or starting with
// it). Exact matches are not suggestions.
func Nearest(want string, candidates []string) []string {
	limit := max(1, len([]rune(want))/3)
	type scored struct {
		s string
		d int
	}
	var near []scored
	seen := map[string]bool{}
	for _, c := range candidates {
		if c == want || seen[c] {
			continue
		}
		seen[c] = true
		// A candidate that starts with want is a likely shortening:
		// "llama" for "llama-3b".
		d := levenshtein(want, c)
		if d > limit && (len(want) < 3 || !strings.HasPrefix(c, want)) {
			continue
		}
		near = append(near, scored{c, d})
	}
	sort.Slice(near, func(i, j int) bool {
		if near[i].d != near[j].d {
			return near[i].d < near[j].d
		}
		return near[i].s < near[j].s
	})
	var out []string
	for i := 0; i < len(near) && i < maxSuggestions; i++ {
		out = append(out, near[i].s)
	}
	return out
}

// DidYouMean is the hint for a list of suggestions: `did you mean "a" or
// "b"?`, or "" when there are none.
func DidYouMean(near []string) string {
	if len(near) == 0 {
		return ""
	}
	q := make([]string, len(near))
	for i, s := range near {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "did you mean " + strings.Join(q, " or ") + "?"
}

// levenshtein is the edit distance between a and b, over runes, in
// O(len(b)) memory. Names are bounded by refs.ParseName, so the
// quadratic time is small.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// withSuggestion adds "did you mean" to a not_found error of resolving
// spec: the nearest ref names for a ref, the nearest tags of the name for
// a tag. Any other error is returned as it is.
func withSuggestion(tx *bolt.Tx, spec refs.Spec, err error) error {
	var e *errs.Error
	if errs.ClassOf(err) != errs.NotFound || !errors.As(err, &e) {
		return err
	}
	var want string
	var candidates []string
	switch spec.Kind {
	case refs.KindRef, refs.KindBack, refs.KindPinned:
		list, lerr := refs.List(tx)
		if lerr != nil {
			return err
		}
		tags, terr := refs.Tags(tx)
		if terr != nil {
			return err
		}
		for _, r := range list {
			candidates = append(candidates, r.Name)
		}
		for _, t := range tags {
			candidates = append(candidates, t.Name)
		}
		want = spec.Name
		if _, cerr := refs.Current(tx, spec.Name); cerr == nil {
			return err // the name exists: what was not found is in its history
		}
	case refs.KindTag:
		tags, terr := refs.Tags(tx)
		if terr != nil {
			return err
		}
		for _, t := range tags {
			candidates = append(candidates, t.String())
		}
		want = spec.Name + ":" + spec.Tag
	default:
		return err
	}
	hint := DidYouMean(Nearest(want, candidates))
	if hint == "" {
		return err
	}
	withHint := *e
	withHint.Msg += "; " + hint
	return &withHint
}

// resolveView is Resolve's transaction, with suggestions on not_found.
func resolveView(st *store.Store, spec refs.Spec, resolve func(tx *bolt.Tx) error) error {
	return st.View(func(tx *bolt.Tx) error {
		return withSuggestion(tx, spec, resolve(tx))
	})
}
