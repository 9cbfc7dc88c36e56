package main

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
)

func TestReorderArgs(t *testing.T) {
	app := newApp()
	for _, tc := range []struct{ in, want string }{
		{"mstore add m --name x --json", "mstore --json add --name x -- m"},
		{"mstore --store s add m -m msg --tag v1", "mstore --store s add -m msg --tag v1 -- m"},
		{"mstore checkout REF DEST --force --tensors a.* --store s", "mstore --store s checkout --force --tensors a.* -- REF DEST"},
		{"mstore checkout REF -- --odd-dest", "mstore checkout -- REF --odd-dest"},
		{"mstore add m --name=x", "mstore add --name=x -- m"},
		{"mstore add m --bogus", "mstore add --bogus -- m"},
		{"mstore ls", "mstore ls"},
		{"mstore --json", "mstore --json"},
	} {
		got, _, err := reorderArgs(app, strings.Fields(tc.in))
		if err != nil || !slices.Equal(got, strings.Fields(tc.want)) {
			t.Errorf("%q → %q, %v; want %q", tc.in, strings.Join(got, " "), err, tc.want)
		}
	}
	if _, _, err := reorderArgs(app, []string{"mstore", "nosuch"}); !errors.Is(err, errs.SchemaError) {
		t.Errorf("unknown command: %v", err)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"5GB": 5e9, "500MiB": 500 << 20, "1.5GB": 1.5e9, "4096": 4096, "10 kb": 1e4, "2G": 2 << 30,
	} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "GB", "-5GB", "5XB", "0", "1e30GB"} {
		if _, err := parseSize(bad); !errors.Is(err, errs.SchemaError) {
			t.Errorf("parseSize(%q): %v, want schema_error", bad, err)
		}
	}
}

func TestClassOfUnclassifiedErrors(t *testing.T) {
	if key, code := classOf(errors.New("disk on fire")); key != "io_error" || code != 1 {
		t.Errorf("got %s %d", key, code)
	}
	if key, code := classOf(errs.New(errs.Conflict, "x", "y")); key != "conflict" || code != errs.Conflict.ExitCode() {
		t.Errorf("got %s %d", key, code)
	}
}
