package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/formats/gguf"
)

// variant is smallModel(1) with the tensors at the indexes in change given
// new bytes from seed: versions that share all their other tensors.
func variant(t *testing.T, dir string, seed uint64, change ...int) string {
	t.Helper()
	ts := smallModel(1)
	for _, i := range change {
		ts[i] = randTensor(ts[i].name, ts[i].dtype, seed+uint64(i), ts[i].shape...)
	}
	writeFiles(t, dir, map[string][]byte{"model.safetensors": safetensorsFile(ts, map[string]string{"format": "pt"}), "config.json": configJSON("float32")})
	return dir
}

type estimateResult struct {
	GCFreesNow   int64    `json:"gc_frees_now"`
	GCFreesAfter int64    `json:"gc_frees_after"`
	FreesBytes   int64    `json:"frees_bytes"`
	FreesBlobs   int      `json:"frees_blobs"`
	Unnamed      []string `json:"unnamed"`
	KeptAlive    []struct {
		Version string   `json:"version"`
		By      []string `json:"by"`
	} `json:"kept_alive"`
}

type versionUsage struct {
	Version      string         `json:"version"`
	LogicalBytes int64          `json:"logical_bytes"`
	Blobs        int            `json:"blobs"`
	BlobBytes    int64          `json:"blob_bytes"`
	UniqueBytes  int64          `json:"unique_bytes"`
	SharedBytes  int64          `json:"shared_bytes"`
	HeldBy       []string       `json:"held_by"`
	IfUnnamed    estimateResult `json:"if_unnamed"`
}

// gcFreed runs gc with no grace period and returns the bytes it freed.
func (c *cli) gcFreed() int64 {
	c.t.Helper()
	var g gcOutput
	c.json(&g, "gc", "--grace", "0")
	if g.Result == nil {
		c.t.Fatalf("gc printed no result")
	}
	return g.Result.FreedBytes
}

// TestSizesAndDryRuns: ls shows each ref's size; du REF splits a version's
// bytes into unique and shared and says who holds it; trim --dry-run and
// rm --dry-run change nothing and predict exactly what the real command
// followed by gc frees (the gc planner's own figures, checked against gc's
// result); rm of a ref with tags says which tags stay and keep what.
func TestSizesAndDryRuns(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	base := t.TempDir()
	a := c.add(variant(t, filepath.Join(base, "a"), 0), "--name", "m", "--tag", "v1")
	b := c.add(variant(t, filepath.Join(base, "b"), 500, 1, 2))
	b = c.add(filepath.Join(base, "b"), "--name", "m")
	cc := c.add(variant(t, filepath.Join(base, "c"), 900, 3), "--name", "m")
	c.ok("rm", "b") // the add without --name made a ref "b"
	if got := c.gcFreed(); got != 0 {
		t.Fatalf("gc freed %d bytes of a store where every version is named", got)
	}

	var ls []struct {
		Name         string `json:"name"`
		LogicalBytes *int64 `json:"logical_bytes"`
	}
	c.json(&ls, "ls")
	if len(ls) != 1 || ls[0].LogicalBytes == nil || *ls[0].LogicalBytes != c.show("m").LogicalBytes {
		t.Errorf("ls: %+v, want m with logical_bytes %d", ls, c.show("m").LogicalBytes)
	}
	if out := c.ok("ls"); !strings.Contains(out, "SIZE") || !strings.Contains(out, " kB ") {
		t.Errorf("ls shows no size:\n%s", out)
	}

	var ub, ua versionUsage
	c.json(&ub, "du", "m~1")
	c.json(&ua, "du", "m:v1")
	if ub.Version != b.Digest || !slices.Equal(ub.HeldBy, []string{"m~1"}) {
		t.Errorf("du m~1: version %s held by %v, want %s held by [m~1]", ub.Version, ub.HeldBy, b.Digest)
	}
	if !slices.Equal(ua.HeldBy, []string{"m:v1", "m~2"}) {
		t.Errorf("du m:v1 held by %v, want [m:v1 m~2]", ua.HeldBy)
	}
	for _, u := range []versionUsage{ua, ub} {
		if u.SharedBytes <= 0 || u.UniqueBytes+u.SharedBytes != u.BlobBytes || u.LogicalBytes != c.show(u.Version).LogicalBytes {
			t.Errorf("du %s: %+v; want shared > 0, unique + shared = blob_bytes, logical as show says", u.Version, u)
		}
	}
	// A shares every byte: B kept its tensors 0 and 3…, C its 1 and 2.
	if ua.UniqueBytes != 0 {
		t.Errorf("du m:v1: %d unique bytes, want 0 (B and C hold all of A's tensors)", ua.UniqueBytes)
	}
	// B's own tensors are two of smallModel's; nothing else has them.
	ts := smallModel(1)
	if min := ts[1].size() + ts[2].size(); ub.UniqueBytes < min {
		t.Errorf("du m~1: unique %d bytes, want at least the %d of its two own tensors", ub.UniqueBytes, min)
	}

	before := c.snapshot()
	var trim struct {
		DryRun   bool           `json:"dry_run"`
		Estimate estimateResult `json:"estimate"`
	}
	c.json(&trim, "trim", "m", "--keep", "1", "--dry-run")
	c.requireUnchanged(before)
	if !trim.DryRun || !slices.Equal(trim.Estimate.Unnamed, []string{b.Digest}) || trim.Estimate.FreesBytes <= 0 {
		t.Errorf("trim --dry-run: %+v; want B (%s) unnamed, bytes freed", trim, b.Digest)
	}
	if trim.Estimate.FreesBytes != ub.IfUnnamed.FreesBytes {
		t.Errorf("trim --dry-run frees %d, du m~1 says unnaming it frees %d", trim.Estimate.FreesBytes, ub.IfUnnamed.FreesBytes)
	}
	c.ok("trim", "m", "--keep", "1")
	if got := c.gcFreed(); got != trim.Estimate.FreesBytes {
		t.Errorf("trim then gc freed %d bytes; the dry run said %d", got, trim.Estimate.FreesBytes)
	}

	var rm struct {
		DryRun   bool `json:"dry_run"`
		KeptTags []struct {
			Name, Tag, Digest string
		} `json:"kept_tags"`
		Estimate estimateResult `json:"estimate"`
	}
	before = c.snapshot()
	c.json(&rm, "rm", "--dry-run", "m")
	c.requireUnchanged(before)
	if !slices.Equal(rm.Estimate.Unnamed, []string{cc.Digest}) || len(rm.KeptTags) != 1 || rm.KeptTags[0].Digest != a.Digest {
		t.Errorf("rm --dry-run m: %+v; want C unnamed, tag v1 at A kept", rm)
	}
	if out := c.ok("rm", "m"); !strings.Contains(out, "kept     tag m:v1") {
		t.Errorf("rm of a ref with a tag does not say the tag stays:\n%s", out)
	}
	if got := c.gcFreed(); got != rm.Estimate.FreesBytes || got <= 0 {
		t.Errorf("rm then gc freed %d bytes; the dry run said %d", got, rm.Estimate.FreesBytes)
	}
	c.fail("not_found", "rm", "--dry-run", "m")
	c.fail("not_found", "rm", "--dry-run", "m:nosuch")
	c.fsck()
}

// TestTagsAndLogMarks: tag with no argument lists every tag with its
// digest, tags NAME those of NAME, and log marks the tagged entries.
func TestTagsAndLogMarks(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	base := t.TempDir()
	a := c.add(variant(t, filepath.Join(base, "a"), 0), "--name", "m", "--tag", "v1")
	c.add(variant(t, filepath.Join(base, "b"), 500, 1), "--name", "m")
	c.ok("tag", "m:v2", "m")
	c.ok("tag", "other:x", "m~1")
	type tagRow struct{ Name, Tag, Digest string }
	var all, mine []tagRow
	c.json(&all, "tag")
	c.json(&mine, "tags", "m")
	if len(all) != 3 || len(mine) != 2 || mine[0].Tag != "v1" || mine[0].Digest != a.Digest || mine[1].Tag != "v2" {
		t.Errorf("tag: %+v; tags m: %+v", all, mine)
	}
	var log []struct {
		Digest string   `json:"digest"`
		Tags   []string `json:"tags"`
	}
	c.json(&log, "log", "m")
	if len(log) != 2 || !slices.Equal(log[0].Tags, []string{"v2"}) || !slices.Equal(log[1].Tags, []string{"v1"}) {
		t.Errorf("log --json: %+v", log)
	}
	if out := c.ok("log", "m"); !strings.Contains(out, "(tag: v1)") {
		t.Errorf("log does not mark m:v1:\n%s", out)
	}
}

// TestDiffExitCodeAndRenames: diff --exit-code exits 1 when the versions
// differ, 0 when they are one, and an error keeps its class's code; a
// SafeTensors and a GGUF holding the same bytes under other names diff as
// renamed tensors, not as added plus removed.
func TestDiffExitCodeAndRenames(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	base := t.TempDir()
	ts := smallModel(3)
	writeFiles(t, filepath.Join(base, "st"), map[string][]byte{"model.safetensors": safetensorsFile(ts, nil)})
	renamed := make([]tensor, len(ts))
	for i, tn := range ts {
		tn.name = strings.NewReplacer("model.layers.", "blk.", "model.", "").Replace(tn.name)
		renamed[i] = tn
	}
	renamed[len(renamed)-1] = randTensor("norm.weight", "F32", 77, 128) // new bytes: stays added/removed
	writeFiles(t, filepath.Join(base, "gg"), ggufModel(t, renamed, gguf.PlanOptions{KVs: ggufKVs}))
	c.add(filepath.Join(base, "st"), "--name", "st")
	c.add(filepath.Join(base, "gg"), "--name", "gg")

	if r := c.run("diff", "--exit-code", "st", "st"); r.code != 0 {
		t.Errorf("diff --exit-code of a version with itself:\n%s", r)
	}
	r := c.run("diff", "--exit-code", "st", "gg")
	if r.code != 1 || r.stderr != "" {
		t.Errorf("diff --exit-code of two versions: want exit 1 and nothing on stderr\n%s", r)
	}
	if !strings.Contains(r.stdout, "same bytes, renamed") || !strings.Contains(r.stdout, "1 added") || !strings.Contains(r.stdout, "1 removed") {
		t.Errorf("diff of SafeTensors and GGUF of the same bytes:\n%s", r.stdout)
	}
	if r := c.run("--json", "diff", "--exit-code", "st", "gg"); r.code != 1 || !strings.Contains(r.stdout, `"renamed"`) {
		t.Errorf("diff --json --exit-code:\n%s", r)
	}
	if r := c.run("diff", "st", "gg"); r.code != 0 {
		t.Errorf("diff without --exit-code exits %d", r.code)
	}
	c.fail("not_found", "diff", "--exit-code", "st", "nosuch")
	var d struct {
		Count   map[string]int `json:"count"`
		Tensors []struct {
			Name, FromName, Change string
		} `json:"tensors"`
	}
	c.json(&d, "diff", "st", "gg")
	if d.Count["renamed"] != len(ts)-1 || d.Count["added"] != 1 || d.Count["removed"] != 1 {
		t.Errorf("diff counts %v, want %d renamed, 1 added, 1 removed", d.Count, len(ts)-1)
	}
}

// TestCopyMoveAndDigestForms: cp makes a ref at a version with a fresh
// history, mv renames with the history, both refuse an existing name
// (conflict) and survive fsck --rebuild-index; blake3:HEX names a version,
// sha256:HEX is refused naming show --sha256, which prints each file's
// sha256 as sha256sum would.
func TestCopyMoveAndDigestForms(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	base := t.TempDir()
	a := c.add(variant(t, filepath.Join(base, "a"), 0), "--name", "m", "--tag", "v1")
	b := c.add(variant(t, filepath.Join(base, "b"), 500, 1), "--name", "m")

	c.ok("cp", "m:v1", "copy")
	if got := c.show("copy").Digest; got != a.Digest {
		t.Errorf("cp m:v1 copy: copy is %s, want %s", got, a.Digest)
	}
	c.ok("mv", "m", "renamed")
	var log []struct{ Digest, Message string }
	c.json(&log, "log", "renamed")
	if len(log) != 2 || log[0].Digest != b.Digest || log[1].Digest != a.Digest {
		t.Errorf("mv kept history %+v, want B then A", log)
	}
	c.fail("not_found", "show", "m")
	if got := c.show("m:v1").Digest; got != a.Digest {
		t.Errorf("m:v1 after mv is %s, want %s: tags stay with their name", got, a.Digest)
	}
	c.fail("conflict", "cp", "m:v1", "renamed")
	c.fail("conflict", "mv", "copy", "renamed")
	c.fail("not_found", "mv", "nosuch", "x")

	before := c.storeViews("renamed", "copy")
	os.Remove(filepath.Join(c.store, "index.db"))
	c.ok("fsck", "--rebuild-index")
	after := c.storeViews("renamed", "copy")
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s after fsck --rebuild-index:\n%s\nwant\n%s", k, after[k], v)
		}
	}

	for _, form := range []string{"blake3:" + a.Digest, "blake3:" + strings.ToUpper(a.Digest[:12]), "renamed@blake3:" + a.Digest[:10]} {
		if got := c.show(form).Digest; got != a.Digest {
			t.Errorf("show %s: %s, want %s", form, got, a.Digest)
		}
	}
	msg := c.fail("schema_error", "show", "sha256:"+strings.Repeat("ab", 32))
	if !strings.Contains(msg, "BLAKE3") || !strings.Contains(msg, "show --sha256") {
		t.Errorf("sha256 refusal does not explain: %s", msg)
	}
	var s struct {
		SHA256 map[string]string `json:"sha256"`
	}
	c.json(&s, "show", "--sha256", "copy")
	for _, name := range []string{"model.safetensors", "config.json"} {
		data, err := os.ReadFile(filepath.Join(base, "a", name))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if want := "sha256:" + hex.EncodeToString(sum[:]); s.SHA256[name] != want {
			t.Errorf("show --sha256: %s is %s, want %s", name, s.SHA256[name], want)
		}
	}
}

// TestDiffRealGGUFAgainstItsSafetensors: llama-2-tiny-random.gguf and the
// Hugging Face SafeTensors checkout writes of it hold the same weights
// under llama.cpp's and transformers' names: diff pairs every tensor whose
// bytes are the same as renamed, and only q_proj and k_proj (which the
// conversion permutes, so their bytes differ) stay added and removed.
func TestDiffRealGGUFAgainstItsSafetensors(t *testing.T) {
	t.Parallel()
	src := filepath.Join(sharedTestdata(t, "gguf"), "llama-2-tiny-random.gguf")
	c := newCLI(t)
	c.add(src, "--name", "tiny")
	hf := filepath.Join(t.TempDir(), "hf")
	c.ok("checkout", "tiny", hf, "--format", "safetensors")
	c.add(hf, "--name", "tiny-hf")
	var d struct {
		Count   map[string]int `json:"count"`
		Tensors []struct {
			Name     string `json:"name"`
			FromName string `json:"from_name"`
			Change   string `json:"change"`
		} `json:"tensors"`
	}
	c.json(&d, "diff", "tiny", "tiny-hf")
	var unpaired []string
	for _, td := range d.Tensors {
		switch td.Change {
		case "renamed":
			if td.FromName == "" || td.FromName == td.Name {
				t.Errorf("renamed tensor %+v", td)
			}
		case "added", "removed":
			unpaired = append(unpaired, td.Name)
		default:
			t.Errorf("tensor %s is %s", td.Name, td.Change)
		}
	}
	slices.Sort(unpaired)
	want := []string{"blk.0.attn_k.weight", "blk.0.attn_q.weight", "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.q_proj.weight"}
	if !slices.Equal(unpaired, want) || d.Count["renamed"] < 8 {
		t.Errorf("diff GGUF → SafeTensors: %v renamed, unpaired %v; want only the permuted q/k unpaired %v", d.Count, unpaired, want)
	}
}
