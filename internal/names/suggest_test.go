package names

import (
	"slices"
	"testing"
)

func TestNearest(t *testing.T) {
	cands := []string{"llama", "llama-3b", "mistral", "qwen2", "bert"}
	for _, tc := range []struct {
		want string
		got  []string
	}{
		{"lama", []string{"llama"}},
		{"llama3b", []string{"llama-3b", "llama"}},
		{"mistrel", []string{"mistral"}},
		{"gpt", nil},                    // too far from everything
		{"llama", []string{"llama-3b"}}, // an exact match is no suggestion; a longer name is
		{"b", nil},
	} {
		if got := Nearest(tc.want, cands); !slices.Equal(got, tc.got) {
			t.Errorf("Nearest(%q) = %q, want %q", tc.want, got, tc.got)
		}
	}
	if got := DidYouMean([]string{"a", "b"}); got != `did you mean "a" or "b"?` {
		t.Errorf("DidYouMean = %q", got)
	}
	if levenshtein("kitten", "sitting") != 3 || levenshtein("", "abc") != 3 || levenshtein("héllo", "hello") != 1 {
		t.Error("levenshtein")
	}
}
