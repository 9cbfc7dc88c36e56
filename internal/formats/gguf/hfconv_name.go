package gguf

import (
	"encoding/json"
	"regexp"
	"strings"
	"unicode"
)

// ModelName is general.name as convert_hf_to_gguf.py's metadata
// heuristics (gguf-py Metadata.apply_metadata_heuristic) make it: from
// config.json's _name_or_path when it is a model id ("org/name" or
// "name", not a path of more folders), else from the model directory's
// name dir, each through Metadata.id_to_title ("Llama-3.1-8B-instruct"
// gives "Llama 3.1 8B Instruct"). fallback is used when neither gives
// one. (The converter reads a README.md model card first, which this
// does not.)
func ModelName(config []byte, dir, fallback string) string {
	var cfg struct {
		NameOrPath *string `json:"_name_or_path"`
	}
	if json.Unmarshal(config, &cfg) == nil && cfg.NameOrPath != nil && strings.Count(*cfg.NameOrPath, "/") <= 1 {
		if name, ok := idName(*cfg.NameOrPath); ok {
			return name
		}
	}
	if dir != "" {
		if name, ok := idName(dir); ok {
			return name
		}
	}
	return fallback
}

// idName is the name Metadata.get_model_id_components and id_to_title
// make of a model id: the part after "org/", title-cased.
func idName(id string) (string, bool) {
	full := id
	if !strings.Contains(id, " ") {
		if _, after, ok := strings.Cut(id, "/"); ok {
			full = after
		}
	}
	if strings.TrimSpace(full) == "" {
		return "", false
	}
	return idToTitle(full), true
}

// versionWord is id_to_title's exception: versions and words that begin
// with a digit keep their case.
var versionWord = regexp.MustCompile(`^(v\d+(?:\.\d+)*|\d.*)$`)

// idToTitle is Metadata.id_to_title: dashes become spaces, and each
// all-lowercase word that is not a version is title-cased as Python's
// str.title does (a letter after a non-letter is upper case).
func idToTitle(s string) string {
	words := strings.Fields(strings.ReplaceAll(strings.TrimSpace(s), "-", " "))
	for i, w := range words {
		if isLower(w) && !versionWord.MatchString(w) {
			words[i] = title(w)
		}
	}
	return strings.Join(words, " ")
}

// isLower is Python's str.islower: some cased letter, none upper case.
func isLower(w string) bool {
	cased := false
	for _, r := range w {
		if unicode.IsUpper(r) || unicode.IsTitle(r) {
			return false
		}
		cased = cased || unicode.IsLower(r)
	}
	return cased
}

// title is Python's str.title.
func title(w string) string {
	var b strings.Builder
	prev := false // the previous rune was cased
	for _, r := range w {
		c := unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r)
		if c && !prev {
			b.WriteRune(unicode.ToTitle(r))
		} else if c {
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(r)
		}
		prev = c
	}
	return b.String()
}
