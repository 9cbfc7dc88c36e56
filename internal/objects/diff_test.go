package objects

import "testing"

// TestCompareRenamed: tensors whose bytes the other version holds under
// another name are paired as renamed, one by one (two tensors of equal
// bytes pair with two, not one with both), and only by content: a tensor
// of new bytes stays added.
func TestCompareRenamed(t *testing.T) {
	ten := func(name string, seed byte, dtype string, shape ...int64) Tensor {
		return Tensor{Name: name, DType: dtype, Shape: shape, Size: 8, Digest: Sum([]byte{seed})}
	}
	a := &Manifest{Tensors: []Tensor{
		ten("model.embed_tokens.weight", 1, "F32", 2, 1),
		ten("model.layers.0.zero_a", 9, "F32", 2),
		ten("model.layers.0.zero_b", 9, "F32", 2),
		ten("lm_head.weight", 3, "F32", 2),
		ten("kept", 4, "F32", 2),
	}}
	b := &Manifest{Tensors: []Tensor{
		ten("token_embd.weight", 1, "F32", 1, 2),
		ten("blk.0.zero_a", 9, "F32", 2),
		ten("blk.0.zero_b", 9, "F32", 2),
		ten("output.weight", 5, "F32", 2), // new bytes
		ten("kept", 4, "F32", 2),
	}}
	d := Compare(a, b)
	want := map[string]string{"token_embd.weight": "model.embed_tokens.weight", "blk.0.zero_a": "model.layers.0.zero_a", "blk.0.zero_b": "model.layers.0.zero_b"}
	got := map[string]string{}
	for _, td := range d.Tensors {
		if td.Change == Renamed {
			got[td.Name] = td.FromName
			if td.NewChunkBytes != 0 || td.FromBytes != 8 || td.ToBytes != 8 {
				t.Errorf("renamed %s: %+v", td.Name, td)
			}
		}
	}
	if len(got) != len(want) {
		t.Fatalf("renamed %v, want %v", got, want)
	}
	for to, from := range want {
		if got[to] != from {
			t.Errorf("%s renamed from %q, want %q", to, got[to], from)
		}
	}
	if d.Count[Renamed] != 3 || d.Count[Added] != 1 || d.Count[Removed] != 1 || d.Count[Unchanged] != 1 || len(d.Tensors) != 6 {
		t.Errorf("counts %v over %d entries, want 3 renamed, 1 added (output.weight), 1 removed (lm_head.weight), 1 unchanged", d.Count, len(d.Tensors))
	}
}
