package gguf

import (
	"sort"
	"unicode/utf8"
)

// spmTokenizerJSON writes the tokenizer.json transformers makes of a
// llama SentencePiece model (LlamaConverter, legacy): a BPE with byte
// fallback whose merges SentencePieceExtractor derives from the pieces —
// every split of a piece into two pieces, ordered by the pieces' ids, then
// all of them by the merged piece's score, highest first (a stable sort);
// "▁" prepended and spaces replaced by it; BOS added when add_bos.
func spmTokenizerJSON(pieces []piece, unk, bos int, addBOS bool) ([]byte, error) {
	ids := make(map[string]int, len(pieces))
	for i := len(pieces) - 1; i >= 0; i-- {
		ids[pieces[i].text] = i
	}
	type merge struct {
		l, r  string
		score float32
	}
	var merges []merge
	for _, p := range pieces {
		var local []merge
		for i := range p.text {
			if i == 0 {
				continue
			}
			l, r := p.text[:i], p.text[i:]
			if !utf8.ValidString(l) || !utf8.ValidString(r) {
				continue
			}
			if _, ok := ids[l]; !ok {
				continue
			}
			if _, ok := ids[r]; ok {
				local = append(local, merge{l, r, p.score})
			}
		}
		sort.SliceStable(local, func(a, b int) bool {
			if ids[local[a].l] != ids[local[b].l] {
				return ids[local[a].l] < ids[local[b].l]
			}
			return ids[local[a].r] < ids[local[b].r]
		})
		merges = append(merges, local...)
	}
	sort.SliceStable(merges, func(a, b int) bool { return merges[a].score > merges[b].score })
	ms := make([][2]string, len(merges))
	for i, m := range merges {
		ms[i] = [2]string{m.l, m.r}
	}
	vocab := &orderedJSON{}
	var added []any
	for i, p := range pieces {
		vocab.set(p.text, i)
		if p.typ == typeControl || p.typ == typeUnknown || p.typ == typeUserDefined {
			a := &orderedJSON{}
			a.set("id", i)
			a.set("content", p.text)
			a.set("single_word", false)
			a.set("lstrip", false)
			a.set("rstrip", false)
			a.set("normalized", p.typ == typeUserDefined)
			a.set("special", p.typ != typeUserDefined)
			added = append(added, a)
		}
	}
	if added == nil {
		added = []any{}
	}
	var unkTok any
	if unk >= 0 {
		unkTok = pieces[unk].text
	}
	model := &orderedJSON{}
	model.set("type", "BPE")
	model.set("dropout", nil)
	model.set("unk_token", unkTok)
	model.set("continuing_subword_prefix", nil)
	model.set("end_of_word_suffix", nil)
	model.set("fuse_unk", true)
	model.set("byte_fallback", true)
	model.set("ignore_merges", false)
	model.set("vocab", vocab)
	model.set("merges", ms)
	t := &orderedJSON{}
	t.set("version", "1.0")
	t.set("truncation", nil)
	t.set("padding", nil)
	t.set("added_tokens", added)
	t.set("normalizer", map[string]any{"type": "Sequence", "normalizers": []any{
		map[string]any{"type": "Prepend", "prepend": "▁"},
		map[string]any{"type": "Replace", "pattern": map[string]string{"String": " "}, "content": "▁"},
	}})
	t.set("pre_tokenizer", nil)
	if addBOS && bos >= 0 {
		b := pieces[bos].text
		seq := func(id string) any { return map[string]any{"Sequence": map[string]any{"id": id, "type_id": 0}} }
		sp := map[string]any{"SpecialToken": map[string]any{"id": b, "type_id": 0}}
		t.set("post_processor", map[string]any{"type": "TemplateProcessing",
			"single": []any{sp, seq("A")}, "pair": []any{sp, seq("A"), sp, seq("B")},
			"special_tokens": map[string]any{b: map[string]any{"id": b, "ids": []int{bos}, "tokens": []string{b}}}})
	} else {
		t.set("post_processor", nil)
	}
	t.set("decoder", map[string]any{"type": "Sequence", "decoders": []any{
		map[string]any{"type": "Replace", "pattern": map[string]string{"String": "▁"}, "content": " "},
		map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"},
		map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0},
	}})
	t.set("model", model)
	return indentJSON(t)
}
