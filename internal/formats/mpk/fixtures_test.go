package mpk_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/mpk"
	"github.com/mstore/mstore/internal/restorer"
	"github.com/mstore/mstore/internal/store"
)

var update = flag.Bool("update", false, "rewrite the fixture archives and fixtures_manifest.json in testdata/ (go generate)")

const (
	fixtureDir   = "testdata/fixtures"
	manifestPath = "testdata/fixtures_manifest.json"
)

// fixturesManifest is testdata/fixtures_manifest.json: the source of truth
// for the fixtures.
type fixturesManifest struct {
	Generator string          `json:"generator"`
	Fixtures  []manifestEntry `json:"fixtures"`
}

type manifestEntry struct {
	Name    string         `json:"name"`
	Rule    string         `json:"rule"`
	Outcome string         `json:"outcome"` // "ok" or a class key
	Limits  *fixtureLimits `json:"limits,omitempty"`
	SHA256  string         `json:"sha256"`
}

func (l *fixtureLimits) formats() formats.Limits {
	if l == nil {
		return formats.Limits{}
	}
	return mpk.LimitsOf(mpk.Bounds{MaxArchiveBytes: l.MaxArchiveBytes, MaxEntries: l.MaxEntries, MaxEntryBytes: l.MaxEntryBytes, MaxJSONDepth: l.MaxJSONDepth})
}

// writeFixtures writes every fixture into dir and returns the encoded
// manifest that describes them.
func writeFixtures(t *testing.T, dir string) []byte {
	t.Helper()
	m := fixturesManifest{Generator: "internal/formats/mpk/fixtures_list_test.go; regenerate with `go generate ./internal/formats/mpk`"}
	seen := map[string]bool{}
	for _, f := range fixtures() {
		if seen[f.name] {
			t.Fatalf("test bug: fixture %s listed twice", f.name)
		}
		seen[f.name] = true
		if err := os.WriteFile(filepath.Join(dir, f.name), f.bytes, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(f.bytes)
		m.Fixtures = append(m.Fixtures, manifestEntry{Name: f.name, Rule: f.rule, Outcome: f.outcome, Limits: f.limits, SHA256: hex.EncodeToString(sum[:])})
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func readManifest(t *testing.T) fixturesManifest {
	t.Helper()
	b, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatalf("%v (generate the fixtures with `go generate ./internal/formats/mpk`)", err)
	}
	var m fixturesManifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%s: %v", manifestPath, err)
	}
	return m
}

// TestFixturesAreReproducible regenerates every fixture in a temp dir and
// fails if a byte differs from testdata/ or a checksum from the manifest.
// With -update it rewrites testdata/ instead.
func TestFixturesAreReproducible(t *testing.T) {
	tmp := t.TempDir()
	manifest := writeFixtures(t, tmp)
	if *update {
		if err := os.RemoveAll(fixtureDir); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(fixtureDir, os.DirFS(tmp)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(manifestPath, manifest, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, manifest) {
		t.Errorf("%s differs from what the generator makes; if the change is intended, run `go generate ./internal/formats/mpk`", manifestPath)
	}
	m := readManifest(t)
	var names []string
	for _, e := range m.Fixtures {
		names = append(names, e.Name)
		regenerated, err := os.ReadFile(filepath.Join(tmp, e.Name))
		if err != nil {
			t.Errorf("%s is in the manifest but the generator does not make it", e.Name)
			continue
		}
		if got := sha256.Sum256(regenerated); hex.EncodeToString(got[:]) != e.SHA256 {
			t.Errorf("%s: regenerated SHA-256 %x, the manifest says %s", e.Name, got, e.SHA256)
		}
		stored, err := os.ReadFile(filepath.Join(fixtureDir, e.Name))
		if err != nil {
			t.Errorf("%s: %v", e.Name, err)
			continue
		}
		if !bytes.Equal(stored, regenerated) {
			t.Errorf("%s: the committed bytes differ from the regenerated ones", e.Name)
		}
	}
	entries, err := os.ReadDir(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	var onDisk []string
	for _, e := range entries {
		onDisk = append(onDisk, e.Name())
	}
	sort.Strings(names)
	if strings.Join(onDisk, "\n") != strings.Join(names, "\n") {
		t.Errorf("%s holds %d files, the manifest lists %d: they must be the same", fixtureDir, len(onDisk), len(names))
	}
}

// TestFixtureOutcomes loads every fixture the manifest lists (the codec's
// Parse, Load, and add into a store) and checks the outcome: success, or
// the manifest's class; an accepted archive is checked out with --extract,
// the path users run, and the tree must be exactly its members, with
// nothing written beside it.
func TestFixtureOutcomes(t *testing.T) {
	m := readManifest(t)
	outcomes := map[string]int{}
	for _, e := range m.Fixtures {
		outcomes[e.Outcome]++
		t.Run(e.Name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(fixtureDir, e.Name))
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != e.SHA256 {
				t.Fatalf("SHA-256 %x, the manifest says %s", sum, e.SHA256)
			}
			codec := mpk.Codec.(formats.Limited).WithLimits(e.Limits.formats())
			l, err := codec.Parse(formattest.NewMemDir(map[string][]byte{e.Name: data}), []string{e.Name})
			checkOutcome(t, "Parse", err, e.Outcome)
			if err == nil {
				checkArchiveLayout(t, l, e.Name, data)
			}

			a, err := mpk.Load(bytes.NewReader(data), mpk.Options{Limits: e.Limits.formats(), Name: e.Name})
			checkOutcome(t, "Load", err, e.Outcome)

			// What users run: add the archive, then checkout --extract.
			src := t.TempDir()
			if err := os.WriteFile(filepath.Join(src, e.Name), data, 0o644); err != nil {
				t.Fatal(err)
			}
			st, err := store.Open(filepath.Join(t.TempDir(), "store"), true, store.Options{LockTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			res, err := archiver.Add(context.Background(), st, filepath.Join(src, e.Name), archiver.Options{Name: "m", Limits: e.Limits.formats()})
			checkOutcome(t, "add", err, e.Outcome)
			if err != nil {
				return
			}
			parent := t.TempDir()
			rootDir := filepath.Join(parent, "root")
			if _, err := restorer.Checkout(context.Background(), st, res.Digest, rootDir, restorer.Options{WriteOptions: formats.WriteOptions{Extract: true}}); err != nil {
				t.Fatalf("checkout --extract: %v", err)
			}
			if got, err := os.ReadDir(parent); err != nil || len(got) != 1 {
				t.Errorf("extraction wrote beside its root: %v %v", got, err)
			}
			checkExtracted(t, rootDir, a, data)
		})
	}
	for _, p := range []string{"/tmp/mstore-mpk-fixture-absolute.so", "/tmp/evil.so"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists: a hostile entry escaped", p)
		}
	}
	for _, class := range []string{"ok", "invalid_archive", "path_traversal", "schema_error", "unsupported_version", "size_limit_exceeded"} {
		if outcomes[class] == 0 {
			t.Errorf("no fixture has outcome %s", class)
		}
	}
}

func checkOutcome(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case want == "ok" && err != nil:
		t.Errorf("%s refused a valid archive: %v", what, err)
	case want == "ok":
	case err == nil:
		t.Errorf("%s accepted it, want %s", what, want)
	case errs.ClassOf(err).Key() != want:
		t.Errorf("%s: class %s, want %s: %v", what, errs.ClassOf(err).Key(), want, err)
	case !strings.Contains(err.Error(), want):
		t.Errorf("%s: the message does not name its class %s: %v", what, want, err)
	}
}

// checkArchiveLayout checks a parsed archive's layout against its
// decompressed tar stream, and the facts File.Meta records.
func checkArchiveLayout(t *testing.T, l *formats.Layout, name string, data []byte) {
	t.Helper()
	tarStream := gunzip(t, data)
	if err := formattest.CheckLayout(l, map[string][]byte{name: tarStream}); err != nil {
		t.Errorf("layout does not describe the tar stream: %v", err)
	}
	meta := l.Files[0].Meta
	sum := sha256.Sum256(data)
	if meta[formats.MetaCompression] != mpk.Compression || meta[mpk.MetaArchiveSHA256] != hex.EncodeToString(sum[:]) {
		t.Errorf("meta %v", meta)
	}
}

// checkExtracted checks that the root holds exactly the members, each at
// its target with its bytes.
func checkExtracted(t *testing.T, rootDir string, a *mpk.Archive, data []byte) {
	t.Helper()
	tarStream := gunzip(t, data)
	want := map[string][]byte{}
	for _, m := range a.Members {
		want[m.Target] = tarStream[m.Offset : m.Offset+m.Size]
	}
	got := map[string][]byte{}
	err := filepath.WalkDir(rootDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !d.Type().IsRegular() {
			t.Errorf("extracted %s is not a regular file", p)
		}
		rel, _ := filepath.Rel(rootDir, p)
		got[filepath.ToSlash(rel)], err = os.ReadFile(p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("extracted %d files, want %d", len(got), len(want))
	}
	for p, b := range want {
		if !bytes.Equal(got[p], b) {
			t.Errorf("%s: extracted bytes differ from the member's", p)
		}
	}
}

func gunzip(t *testing.T, data []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func dirEntries(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, ", ")
}
