package hfcache

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/layouts/layout"
	"github.com/mstore/mstore/internal/modeldir"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
)

// Layout is the Hugging Face cache layout.
var Layout layout.FileLayout = hfCache{}

type hfCache struct{}

func (hfCache) Name() string { return "hf-cache" }

const (
	repoPrefix = "models--"
	// Metadata keys recorded in the manifest.
	MetaRepo     = "hf.repo"
	MetaRevision = "hf.revision"
	MetaRefs     = "hf.refs" // comma-separated, sorted
	// maxRefFile bounds a refs/ file (a 40-digit commit id and a newline).
	maxRefFile = 256
	maxRefs    = 4096
)

// Detect takes a snapshot, a repo folder, or a hub folder holding repos.
func (hfCache) Detect(path string) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	if _, ok := modeldir.HFSnapshotRepo(abs); ok {
		return isDir(abs)
	}
	if isRepo(abs) {
		return true
	}
	repos, _ := filepath.Glob(filepath.Join(abs, repoPrefix+"*"))
	for _, r := range repos {
		if isRepo(r) {
			return true
		}
	}
	return false
}

func isDir(p string) bool {
	info, err := os.Lstat(p)
	return err == nil && info.IsDir()
}

func isRepo(p string) bool {
	return strings.HasPrefix(filepath.Base(p), repoPrefix) && isDir(filepath.Join(p, "snapshots"))
}

// Sources lists the snapshots at path.
func (hfCache) Sources(path string) ([]layout.Source, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("hfcache: %w", err)
	}
	if repo, ok := modeldir.HFSnapshotRepo(abs); ok {
		return repoSources(repo, filepath.Base(abs))
	}
	if isRepo(abs) {
		return repoSources(abs, "")
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return nil, fmt.Errorf("hfcache: %w", err)
	}
	var out []layout.Source
	for _, e := range entries { // ReadDir sorts by name
		if !strings.HasPrefix(e.Name(), repoPrefix) || !isRepo(filepath.Join(abs, e.Name())) {
			continue // datasets--…, spaces--…, .locks: not models
		}
		repo := filepath.Join(abs, e.Name())
		srcs, err := repoSources(repo, "")
		if err != nil { // this repo is refused, not the others
			srcs = []layout.Source{{Name: RepoID(e.Name()), Root: repo, Err: err}}
		}
		out = append(out, srcs...)
	}
	return out, nil
}

// RepoID is ORG/NAME for the folder models--ORG--NAME.
func RepoID(folder string) string {
	return strings.ReplaceAll(strings.TrimPrefix(folder, repoPrefix), "--", "/")
}

// repoFolder is RepoID's inverse.
func repoFolder(id string) string { return repoPrefix + strings.ReplaceAll(id, "/", "--") }

// repoSources lists the snapshots of one repo (only the one named only,
// when set), in the order they are to be added.
func repoSources(repo, only string) ([]layout.Source, error) {
	id := RepoID(filepath.Base(repo))
	if !refs.ValidName(id) {
		return nil, errs.New(errs.SchemaError, "hfcache", "%s: the repo id %q is not a valid mstore name; add its snapshot with --name", repo, id)
	}
	byRev, err := readRefs(repo)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(filepath.Join(repo, "snapshots"))
	if err != nil {
		return nil, fmt.Errorf("hfcache: %w", err)
	}
	type snap struct {
		rev  string
		info fs.FileInfo
	}
	var snaps []snap
	for _, e := range entries {
		if only != "" && e.Name() != only {
			continue
		}
		p := filepath.Join(repo, "snapshots", e.Name())
		info, err := os.Lstat(p)
		if err != nil {
			return nil, fmt.Errorf("hfcache: %w", err)
		}
		if !info.IsDir() {
			return nil, errs.New(errs.PathTraversal, "hfcache", "%s is not a folder (a snapshot must be one; links are not followed)", p)
		}
		snaps = append(snaps, snap{e.Name(), info})
	}
	// Oldest first, and the revision main names last: the ref ends there.
	isMain := func(rev string) bool { return contains(byRev[rev], "main") }
	sort.SliceStable(snaps, func(i, j int) bool {
		a, b := snaps[i], snaps[j]
		if isMain(a.rev) != isMain(b.rev) {
			return isMain(b.rev)
		}
		if !a.info.ModTime().Equal(b.info.ModTime()) {
			return a.info.ModTime().Before(b.info.ModTime())
		}
		return a.rev < b.rev
	})
	var out []layout.Source
	for _, s := range snaps {
		dir := filepath.Join(repo, "snapshots", s.rev)
		meta := map[string]string{MetaRepo: id, MetaRevision: s.rev}
		msg := fmt.Sprintf("add %s revision %s from a Hugging Face cache", id, s.rev)
		if r := byRev[s.rev]; len(r) > 0 {
			meta[MetaRefs] = strings.Join(r, ",")
			msg += " (refs/" + strings.Join(r, ", refs/") + ")"
		}
		src := layout.Source{Name: id, Message: msg, Root: dir, Meta: meta, Bytes: treeBytes(dir)}
		if refs.ValidTag(s.rev) {
			src.Tag = s.rev
		}
		out = append(out, src)
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// readRefs maps each revision to the refs/ files that name it. refs/ must
// be a real folder; its files are small (bounded) and regular.
func readRefs(repo string) (map[string][]string, error) {
	dir := filepath.Join(repo, "refs")
	info, err := os.Lstat(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hfcache: %w", err)
	}
	if !info.IsDir() {
		return nil, errs.New(errs.PathTraversal, "hfcache", "%s is not a folder (links are not followed)", dir)
	}
	out := map[string][]string{}
	n := 0
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("hfcache: %w", err)
		}
		if e.IsDir() {
			return nil
		}
		if !e.Type().IsRegular() {
			return errs.New(errs.PathTraversal, "hfcache", "%s is not a regular file (links are not followed)", p)
		}
		if n++; n > maxRefs {
			return errs.New(errs.SizeLimitExceeded, "hfcache", "%s holds more than %d refs", dir, maxRefs)
		}
		b, err := layout.ReadFile(p, maxRefFile)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rev := strings.TrimSpace(string(b))
		if !objects.IsCleanPath(rev) || strings.Contains(rev, "/") {
			return errs.New(errs.SchemaError, "hfcache", "%s does not hold a revision (%q)", p, rev)
		}
		out[rev] = append(out[rev], filepath.ToSlash(rel))
		return nil
	})
	for _, r := range out {
		sort.Strings(r)
	}
	return out, err
}

// treeBytes is about the size of a snapshot's files (its links followed),
// for the progress display; modeldir checks the links when they are read.
func treeBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
