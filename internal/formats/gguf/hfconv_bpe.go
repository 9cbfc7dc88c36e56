package gguf

import (
	"encoding/json"
	"strings"

	"github.com/mstore/mstore/internal/errs"
)

// tokenizerJSON is the part of a tokenizers tokenizer.json read here.
type tokenizerJSON struct {
	AddedTokens []addedToken    `json:"added_tokens"`
	PreTok      json.RawMessage `json:"pre_tokenizer"`
	Model       struct {
		Type         string            `json:"type"`
		Vocab        map[string]int    `json:"vocab"`
		Merges       []json.RawMessage `json:"merges"`
		ByteFallback bool              `json:"byte_fallback"`
	} `json:"model"`
}

type addedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	Special    bool   `json:"special"`
	Normalized bool   `json:"normalized"`
}

func parseTokenizerJSON(b []byte) (*tokenizerJSON, error) {
	var t tokenizerJSON
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, errs.Wrap(errs.SchemaError, "hfconv", err, "tokenizer.json does not parse")
	}
	return &t, nil
}

// merges returns model.merges as "a b" strings; tokenizers writes them as
// such strings or, since 0.20, as ["a", "b"] pairs.
func (t *tokenizerJSON) merges() ([]string, error) {
	out := make([]string, len(t.Model.Merges))
	for i, raw := range t.Model.Merges {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			out[i] = s
			continue
		}
		var pair []string
		if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
			return nil, errs.New(errs.SchemaError, "hfconv", "tokenizer.json merge %d is %s, not \"a b\" or [\"a\", \"b\"]", i, raw)
		}
		out[i] = pair[0] + " " + pair[1]
	}
	return out, nil
}

// knownPre is the pre-tokenizers llama.cpp implements, by the
// tokenizer.json declaration they come from: a Split regex followed by a
// ByteLevel without regex, or ("" regex) ByteLevel with GPT-2's regex.
var knownPre = []struct{ name, regex string }{
	{"gpt-2", ""},
	{"llama-bpe", `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
	{"qwen2", `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
}

type preTokenizer struct {
	Type          string          `json:"type"`
	Pretokenizers []preTokenizer  `json:"pretokenizers"`
	Pattern       json.RawMessage `json:"pattern"`
	UseRegex      *bool           `json:"use_regex"`
	AddPrefix     bool            `json:"add_prefix_space"`
}

// detectPre names the llama.cpp pre-tokenizer (tokenizer.ggml.pre) of a
// tokenizer.json pre_tokenizer, or refuses one llama.cpp has no match for.
func detectPre(raw json.RawMessage) (string, error) {
	var p preTokenizer
	if len(raw) == 0 || string(raw) == "null" {
		return "", errs.New(errs.UnsupportedVersion, "hfconv", "tokenizer.json has no pre_tokenizer; llama.cpp's byte-level BPE needs one it knows (%s)", preNames())
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return "", errs.Wrap(errs.SchemaError, "hfconv", err, "tokenizer.json pre_tokenizer")
	}
	regex := "?"
	switch {
	case p.Type == "ByteLevel" && (p.UseRegex == nil || *p.UseRegex) && !p.AddPrefix:
		regex = ""
	case p.Type == "Sequence" && len(p.Pretokenizers) == 2 && p.Pretokenizers[0].Type == "Split" &&
		p.Pretokenizers[1].Type == "ByteLevel" && p.Pretokenizers[1].UseRegex != nil && !*p.Pretokenizers[1].UseRegex:
		var pat struct{ Regex string }
		if json.Unmarshal(p.Pretokenizers[0].Pattern, &pat) == nil && pat.Regex != "" {
			regex = pat.Regex
		}
	}
	for _, k := range knownPre {
		if k.regex == regex {
			return k.name, nil
		}
	}
	return "", errs.New(errs.UnsupportedVersion, "hfconv", "tokenizer.json pre_tokenizer %s is not one this build maps to llama.cpp's (%s); convert with llama.cpp's convert_hf_to_gguf.py", compact(raw), preNames())
}

func preNames() string {
	var n []string
	for _, k := range knownPre {
		n = append(n, k.name)
	}
	return strings.Join(n, ", ")
}

func compact(raw json.RawMessage) string {
	s := string(raw)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// preJSON is the tokenizer.json pre_tokenizer for a llama.cpp pre name.
func preJSON(name string) (any, bool) {
	for _, k := range knownPre {
		if k.name != name {
			continue
		}
		if k.regex == "" {
			return map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}, true
		}
		return map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]string{"Regex": k.regex}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}}, true
	}
	return nil, false
}

// looksSpecial is the converter's does_token_look_special.
func looksSpecial(s string) bool {
	switch s {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>") ||
		strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>") ||
		strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">")
}

// bpeVocab is get_vocab_base of convert_hf_to_gguf.py: the tokens by id
// (vocab_size of config.json, ids without a token as [PAD<id>] UNUSED),
// added tokens CONTROL when special or special-looking, USER_DEFINED
// otherwise (▁ written as a space), the rest NORMAL.
func bpeVocab(t *tokenizerJSON, vocabSize int, hasSize bool) (tokens []string, types []int32, err error) {
	byID := map[int]string{}
	for tok, id := range t.Model.Vocab {
		byID[id] = tok
	}
	added := map[int]addedToken{}
	for _, a := range t.AddedTokens {
		byID[a.ID] = a.Content
		added[a.ID] = a
	}
	maxID := -1
	for id := range byID {
		if id < 0 {
			return nil, nil, errs.New(errs.SchemaError, "hfconv", "tokenizer.json has token id %d", id)
		}
		maxID = max(maxID, id)
	}
	if !hasSize {
		vocabSize = len(byID)
	}
	if maxID >= vocabSize {
		return nil, nil, errs.New(errs.SchemaError, "hfconv", "tokenizer.json has token id %d, config.json vocab_size is %d", maxID, vocabSize)
	}
	tokens, types = make([]string, vocabSize), make([]int32, vocabSize)
	for i := range vocabSize {
		tok, ok := byID[i]
		switch a, isAdded := added[i]; {
		case !ok:
			tokens[i], types[i] = padToken(i), typeUnused
		case isAdded && (a.Special || looksSpecial(tok)):
			tokens[i], types[i] = tok, typeControl
		case isAdded:
			tokens[i], types[i] = strings.ReplaceAll(tok, "▁", " "), typeUserDefined
		default:
			tokens[i], types[i] = tok, typeNormal
		}
	}
	return tokens, types, nil
}
