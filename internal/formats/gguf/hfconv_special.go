package gguf

import (
	"encoding/json"

	"github.com/mstore/mstore/internal/errs"
)

// specialTypes are gguf-py SpecialVocab's token kinds with their GGUF key
// names (gguf-py spells "separator" seperator).
var specialTypes = []struct{ typ, key string }{
	{"bos", "bos"}, {"eos", "eos"}, {"unk", "unknown"}, {"sep", "seperator"},
	{"pad", "padding"}, {"cls", "cls"}, {"mask", "mask"},
}

// specialKVs is SpecialVocab.add_to_gguf without the merges: the special
// token ids from tokenizer_config.json's "<kind>_token" (a string or
// {"content": …}) looked up in tokenizer.json's added_tokens, then in the
// vocabulary itself (a tokenizer.model-only directory has no added_tokens;
// the converter would go to config.json alone), then config.json's
// "<kind>_token_id"; add_bos_token / add_eos_token; chat_template.
func specialKVs(tc map[string]json.RawMessage, added []addedToken, tokens []string, cfg *config) ([]KV, error) {
	var kvs []KV
	index := map[string]int{}
	for i := len(tokens) - 1; i >= 0; i-- {
		index[tokens[i]] = i
	}
	for _, st := range specialTypes {
		id := -1
		if content, ok := tokenContent(tc[st.typ+"_token"]); ok {
			for _, a := range added {
				if a.Content == content {
					id = a.ID
					break
				}
			}
			if id < 0 {
				if i, ok := index[content]; ok {
					id = i
				}
			}
		}
		if id < 0 && cfg != nil {
			if v, ok, _ := cfg.u32(st.typ + "_token_id"); ok {
				id = int(v)
			}
		}
		if id >= 0 && id < len(tokens) {
			kvs = append(kvs, KV{Key: "tokenizer.ggml." + st.key + "_token_id", Value: Uint32Value(uint32(id))})
		}
	}
	for _, st := range specialTypes {
		var b bool
		if raw, ok := tc["add_"+st.typ+"_token"]; ok && json.Unmarshal(raw, &b) == nil {
			kvs = append(kvs, KV{Key: "tokenizer.ggml.add_" + st.typ + "_token", Value: BoolValue(b)})
		}
	}
	if raw, ok := tc["chat_template"]; ok {
		tmpl, err := chatTemplate(raw)
		if err != nil {
			return nil, err
		}
		if tmpl != "" {
			kvs = append(kvs, KV{Key: "tokenizer.chat_template", Value: StringValue(tmpl)})
		}
	}
	return kvs, nil
}

func tokenContent(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" { // qwen2's bos_token: null
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var d struct {
		Content *string `json:"content"`
	}
	if json.Unmarshal(raw, &d) == nil && d.Content != nil {
		return *d.Content, true
	}
	return "", false
}

// chatTemplate is a chat_template string, or of a list of named templates
// the one named "default" (SpecialVocab writes the others under
// tokenizer.chat_template.<name>; this package keeps only the default).
func chatTemplate(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var list []struct{ Name, Template string }
	if err := json.Unmarshal(raw, &list); err != nil {
		if string(raw) == "null" {
			return "", nil
		}
		return "", errs.New(errs.SchemaError, "hfconv", "tokenizer_config.json chat_template is neither a string nor a list of {name, template}")
	}
	for _, t := range list {
		if t.Name == "default" {
			return t.Template, nil
		}
	}
	return "", nil
}
