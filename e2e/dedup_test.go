package e2e

import (
	"bytes"
	"path/filepath"
	"testing"
)

// fineTunePair writes a base model and a fine-tune of it that changes two
// tensors (same names, dtypes and shapes: the header is unchanged) and
// config.json. It returns both directories and the changed tensors.
func fineTunePair(t *testing.T) (base, ft string, changed []tensor, ftConfig []byte) {
	t.Helper()
	tmp := t.TempDir()
	tensors := smallModel(10)
	base = filepath.Join(tmp, "base")
	writeFiles(t, base, map[string][]byte{
		"model.safetensors": safetensorsFile(tensors, nil),
		"config.json":       configJSON("float32"),
		"tokenizer.json":    tokenizerJSON(),
	})
	tuned := append([]tensor{}, tensors...)
	for i, tn := range tuned {
		switch tn.name {
		case "model.layers.1.self_attn.q_proj.weight", "model.layers.2.mlp.up_proj.weight":
			tuned[i] = randTensor(tn.name, tn.dtype, 9000+uint64(i), tn.shape...)
			changed = append(changed, tuned[i])
		}
	}
	ftConfig = configJSON("float32", `"_name_or_path": "acme/llm-ft"`)
	ft = filepath.Join(tmp, "ft")
	writeFiles(t, ft, map[string][]byte{
		"model.safetensors": safetensorsFile(tuned, nil),
		"config.json":       ftConfig,
		"tokenizer.json":    tokenizerJSON(),
	})
	return base, ft, changed, ftConfig
}

// TestFineTuneDedup: a fine-tune that shares most tensors with its base
// grows the store by exactly its changed tensors and config.json.
func TestFineTuneDedup(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	base, ft, changed, ftConfig := fineTunePair(t)
	b := c.add(base, "--name", "base")
	before := c.du()
	f := c.add(ft, "--name", "ft")
	after := c.du()

	want := int64(len(ftConfig)) + c.manifestSize(f.Digest) // the header frame is the base's
	for _, tn := range changed {
		want += tn.size()
	}
	if got := after.BlobBytes - before.BlobBytes; got != want {
		t.Errorf("the fine-tune grew the store's blobs by %d bytes, want %d (2 changed tensors, config.json, the manifest)", got, want)
	}
	if f.NewBytes != want || f.NewBlobs != len(changed)+2 {
		t.Errorf("add of the fine-tune: new_bytes=%d new_blobs=%d, want %d and %d", f.NewBytes, f.NewBlobs, want, len(changed)+2)
	}
	if after.Versions != 2 || after.LogicalBytes != b.LogicalBytes+f.LogicalBytes {
		t.Errorf("du after both: %+v; want 2 versions, %d logical bytes", after, b.LogicalBytes+f.LogicalBytes)
	}
	if after.StoredBytes != after.BlobBytes+after.IndexBytes {
		t.Errorf("du: stored bytes %d are not blob bytes %d + index bytes %d", after.StoredBytes, after.BlobBytes, after.IndexBytes)
	}
	if want := float64(after.LogicalBytes) / float64(after.StoredBytes); after.DedupRatio < want*0.999 || after.DedupRatio > want*1.001 {
		t.Errorf("dedup ratio %.4f, want logical/stored = %.4f", after.DedupRatio, want)
	}
	if after.DedupRatio <= before.DedupRatio {
		t.Errorf("dedup ratio went from %.2f to %.2f on adding a fine-tune sharing most of its bytes", before.DedupRatio, after.DedupRatio)
	}

	dest := filepath.Join(t.TempDir(), "ft")
	c.ok("checkout", "ft", dest)
	requireSameTree(t, ft, dest)
}

// TestDiffFineTune: diff reports the changed tensors and config.json.
func TestDiffFineTune(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	base, ft, changed, _ := fineTunePair(t)
	b := c.add(base, "--name", "base")
	f := c.add(ft, "--name", "acme/ft")

	var d struct {
		From    string `json:"from"`
		To      string `json:"to"`
		Tensors []struct {
			Name          string `json:"name"`
			Change        string `json:"change"`
			FromBytes     int64  `json:"from_bytes"`
			ToBytes       int64  `json:"to_bytes"`
			NewChunkBytes int64  `json:"new_chunk_bytes"`
		} `json:"tensors"`
		Files []struct {
			Path   string `json:"path"`
			Change string `json:"change"`
		} `json:"files"`
		Count map[string]int `json:"count"`
	}
	c.json(&d, "diff", "base", "acme/ft")
	if d.From != b.Digest || d.To != f.Digest {
		t.Errorf("diff from %s to %s, want %s to %s", d.From, d.To, b.Digest, f.Digest)
	}
	wantChanged := map[string]int64{}
	for _, tn := range changed {
		wantChanged[tn.name] = tn.size()
	}
	gotChanged := map[string]bool{}
	for _, td := range d.Tensors {
		switch td.Change {
		case "changed":
			gotChanged[td.Name] = true
			if size, ok := wantChanged[td.Name]; !ok {
				t.Errorf("diff says %s changed; it did not", td.Name)
			} else if td.FromBytes != size || td.ToBytes != size || td.NewChunkBytes != size {
				t.Errorf("diff of %s: from %d to %d bytes, %d in new chunks; want %d each", td.Name, td.FromBytes, td.ToBytes, td.NewChunkBytes, size)
			}
		case "unchanged":
		default:
			t.Errorf("diff says %s was %s", td.Name, td.Change)
		}
	}
	if len(gotChanged) != len(wantChanged) {
		t.Errorf("diff reports %d changed tensors %v, want %v", len(gotChanged), gotChanged, wantChanged)
	}
	if d.Count["changed"] != len(changed) || d.Count["unchanged"] != len(smallModel(10))-len(changed) {
		t.Errorf("diff counts %v", d.Count)
	}
	files := map[string]string{}
	for _, fd := range d.Files {
		files[fd.Path] = fd.Change
	}
	if files["config.json"] != "changed" || files["tokenizer.json"] != "unchanged" {
		t.Errorf("diff of files: %v; want config.json changed, tokenizer.json unchanged", files)
	}

	// And the other way round, without --json.
	out := c.ok("diff", "acme/ft", "base")
	for _, tn := range changed {
		if !bytes.Contains([]byte(out), []byte(tn.name)) {
			t.Errorf("diff output does not name %s:\n%s", tn.name, out)
		}
	}
	if !bytes.Contains([]byte(out), []byte("config.json")) {
		t.Errorf("diff output does not name config.json:\n%s", out)
	}
}

// TestVocabResize: rows appended to an embedding of several 4 MiB chunks
// re-use every full chunk before the change.
func TestVocabResize(t *testing.T) {
	if testing.Short() {
		t.Skip("adds two 13 MB models")
	}
	t.Parallel()
	const chunk = 4 << 20
	const hidden = 1024
	embed := randTensor("model.embed_tokens.weight", "F32", 77, 3200, hidden) // 12.5 MiB: 3 full chunks and a tail
	other := randTensor("lm_head.bias", "F32", 78, 3200)
	tmp := t.TempDir()
	base := writeFile(t, filepath.Join(tmp, "base", "model.safetensors"), safetensorsFile([]tensor{embed, other}, nil))

	grown := tensor{name: embed.name, dtype: "F32", shape: []int64{3264, hidden}}
	grown.data = append(append([]byte{}, embed.data...), randBytes(79, 64*hidden*4)...)
	resizedFile := safetensorsFile([]tensor{grown, other}, nil)
	resized := writeFile(t, filepath.Join(tmp, "resized", "model.safetensors"), resizedFile)

	c := newCLI(t)
	c.add(base, "--name", "llm")
	before := c.du()
	res := c.add(resized, "--name", "llm")
	after := c.du()

	fullChunks := grown.size() / chunk
	if fullChunks != 3 {
		t.Fatalf("test bug: the grown embedding has %d full chunks", fullChunks)
	}
	tail := grown.size() - fullChunks*chunk
	want := tail + headerSize(t, resizedFile) + c.manifestSize(res.Digest) // the new tail chunk, the new header, the manifest
	if res.NewBytes != want {
		t.Errorf("vocabulary resize stored %d new bytes, want %d (a %d-byte tail chunk, a %d-byte header and the manifest)",
			res.NewBytes, want, tail, headerSize(t, resizedFile))
	}
	if got := after.BlobBytes - before.BlobBytes; got != res.NewBytes {
		t.Errorf("du grew by %d blob bytes, add said %d new bytes", got, res.NewBytes)
	}

	s := c.show("llm")
	var emb, oldEmb []string
	for _, tn := range s.Manifest.Tensors {
		if tn.Name == embed.name {
			emb = tn.Chunks
		}
	}
	for _, tn := range c.show("llm~1").Manifest.Tensors {
		if tn.Name == embed.name {
			oldEmb = tn.Chunks
		}
	}
	if len(emb) != 4 || len(oldEmb) != 4 {
		t.Fatalf("embedding chunks: %d now, %d before; want 4 and 4", len(emb), len(oldEmb))
	}
	for i := range 3 {
		if emb[i] != oldEmb[i] {
			t.Errorf("full chunk %d of the embedding was not re-used", i)
		}
	}

	dest := filepath.Join(t.TempDir(), "out")
	c.ok("checkout", "llm", dest)
	requireSameFile(t, resized, filepath.Join(dest, "model.safetensors"))
}
