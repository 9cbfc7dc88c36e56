package main

import "testing"

func TestSingularize(t *testing.T) {
	for in, want := range map[string]string{
		"1 files, 2 tensors":                     "1 file, 2 tensors",
		"m: 1 new blobs":                         "m: 1 new blob",
		"dropped 1 history entries, kept 3":      "dropped 1 history entry, kept 3",
		"coded 1 delta(s) again; 2 delta(s)":     "coded 1 delta again; 2 deltas",
		"11 files, 21 blobs":                     "11 files, 21 blobs",
		"v1 files":                               "v1 files",
		"1 versions, 1 blobs\nlogical    1.0 kB": "1 version, 1 blob\nlogical    1.0 kB",
		"1 gigabytes":                            "1 gigabytes",
	} {
		if got := singularize(in); got != want {
			t.Errorf("singularize(%q) = %q, want %q", in, got, want)
		}
	}
}
