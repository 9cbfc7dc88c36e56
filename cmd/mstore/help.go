package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/codecs"
)

// versionForms explains the version names every command that reads a
// version takes.
const versionForms = `VERSION NAMES (REF):
   NAME            the ref's current version           llama
   NAME:TAG        a tag (immutable)                   llama:v1
   NAME@DIGEST     a version in NAME's history         llama@3f9a0c12
   NAME~N          N moves back in NAME's history      llama~1
   DIGEST          any version, by 8+ hex digits       3f9a0c12
   blake3:DIGEST   the same, as digests are pasted     blake3:3f9a0c12`

// commandHelp is each command's examples, and whether it reads version
// names. Every command has an entry (TestEveryCommandHasExamples): a new
// command adds one here.
var commandHelp = map[string]struct {
	examples string
	versions bool
}{
	"init":       {examples: "mstore init ~/models/store\nmstore --store ~/models/store ls", versions: false},
	"add":        {examples: "mstore add ./Llama-3.2-1B --name llama --tag v1 -m 'from HF'\nmstore add model.gguf --tag q4 --tag latest\nmstore add ~/.cache/huggingface/hub          # every repo and revision\nmstore add ~/.ollama/models --only llama3.2:1b\nmstore --json add ./bert --name bert"},
	"checkout":   {examples: "mstore checkout llama:v1 ./out\nmstore checkout llama ./out.gguf --format gguf\nmstore checkout llama ./f16 --dtype f16 --max-shard-size 5GB\nmstore checkout acme/llm ~/.cache/huggingface/hub --layout hf-cache\nmstore checkout llama ./llama.oci --layout oci", versions: true},
	"ls":         {examples: "mstore ls\nmstore --json ls\nmstore -q ls        # names only"},
	"show":       {examples: "mstore show llama\nmstore show llama:v1 --json", versions: true},
	"log":        {examples: "mstore log llama\nmstore log llama --json"},
	"tag":        {examples: "mstore tag llama:v2 llama\nmstore tag llama:base llama~3\nmstore tag              # every tag with its digest", versions: true},
	"rm":         {examples: "mstore rm llama:v1     # a tag\nmstore rm llama --dry-run\nmstore rm llama        # the ref and its history\nmstore gc              # then free the bytes"},
	"cp":         {examples: "mstore cp llama:v1 llama-exp   # a new ref at that version\nmstore cp llama@3f9a0c12 pinned", versions: true},
	"mv":         {examples: "mstore mv llama llama-3.2     # the ref with its history"},
	"diff":       {examples: "mstore diff llama~1 llama\nmstore diff llama:v1 llama:v2 --json", versions: true},
	"du":         {examples: "mstore du\nmstore du llama:v1   # what rm + gc would free\nmstore du --json", versions: true},
	"gc":         {examples: "mstore gc --dry-run\nmstore gc"},
	"fsck":       {examples: "mstore fsck\nmstore fsck --repair"},
	"trim":       {examples: "mstore trim llama --keep 3\nmstore gc"},
	"repack":     {examples: "mstore repack\nmstore du      # the coded sizes"},
	"pull":       {examples: "mstore remote add hub https://models.example.org\nmstore pull hub llama:v1\nmstore pull /mnt/shared/store llama"},
	"push":       {examples: "mstore push hub llama\nmstore push s3://bucket/models llama:v1"},
	"remote":     {examples: "mstore remote add hub https://models.example.org\nmstore remote ls\nmstore remote rm hub"},
	"serve":      {examples: "mstore serve --addr 127.0.0.1:8080\nmstore serve --addr :8080 --allow-push --token-file ./token"},
	"version":    {examples: "mstore version\nmstore --version\nmstore version --json"},
	"completion": {examples: "source <(mstore completion bash)\nmstore completion zsh > \"${fpath[1]}/_mstore\"\nmstore completion fish > ~/.config/fish/completions/mstore.fish"},
	"man":        {examples: "mstore man > mstore.1 && man -l mstore.1"},
}

// addHelp gives every command its examples (and the version names where
// it reads them) under `mstore help CMD` and `CMD --help`, and lists the
// values of every --format flag from the codec registry.
func addHelp(app *cli.App) {
	for _, c := range app.Commands {
		describe(c, "")
	}
}

func describe(c *cli.Command, parent string) {
	full := strings.TrimSpace(parent + " " + c.Name)
	if h, ok := commandHelp[full]; ok && c.CustomHelpTemplate == "" {
		// The examples follow the options, as a man page's EXAMPLES do;
		// they are plain text appended to urfave/cli's template.
		var b strings.Builder
		b.WriteString("\nEXAMPLES:\n")
		for _, l := range strings.Split(h.examples, "\n") {
			b.WriteString("   " + l + "\n")
		}
		if h.versions {
			b.WriteString("\n" + versionForms + "\n")
		}
		c.CustomHelpTemplate = strings.TrimRight(cli.CommandHelpTemplate, "\n") + "\n" + strings.ReplaceAll(b.String(), "{{", "{{`{{`}}")
	}
	for _, f := range c.Flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Name == "format" && !strings.Contains(sf.Usage, "one of:") {
			sf.Usage = fmt.Sprintf("%s; one of: %s", sf.Usage, codecs.Planners())
		}
	}
}
