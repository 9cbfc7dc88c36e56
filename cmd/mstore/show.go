package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/codecs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/restorer"
)

type showOutput struct {
	Digest       objects.Digest `json:"digest"`
	LogicalBytes int64          `json:"logical_bytes"`
	Warnings     []string       `json:"warnings"`
	Details      any            `json:"details,omitempty"` // the format's own view, if it has one
	// SHA256 (with --sha256) is each file's sha256 by path, as Hugging Face
	// and Ollama name files; mstore's own digests are BLAKE3.
	SHA256   map[string]string `json:"sha256,omitempty"`
	Manifest *objects.Manifest `json:"manifest"`
}

// writeJSON writes o's members as encoding/json would (see jsonstream.go),
// the manifest a file or tensor at a time.
func (o showOutput) writeJSON(d *jsonDoc) {
	d.field("digest", o.Digest)
	d.field("logical_bytes", o.LogicalBytes)
	d.field("warnings", o.Warnings)
	if o.Details != nil {
		d.field("details", o.Details)
	}
	if len(o.SHA256) > 0 {
		d.field("sha256", o.SHA256)
	}
	if o.Manifest == nil {
		d.field("manifest", nil)
		return
	}
	d.stream("manifest", o.Manifest.WriteJSON)
}

var showCommand = &cli.Command{
	Name:      "show",
	Usage:     "show a version's files and tensors",
	ArgsUsage: "REF",
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "sha256", Usage: "also print each file's sha256 (read back from the blobs: it takes as long as a checkout)"},
	},
	Action: func(c *cli.Context) error {
		e, st, err := withStore(c, 1, "REF")
		if err != nil {
			return err
		}
		d, m, err := loadManifest(st, c.Args().First())
		if err != nil {
			return err
		}
		out := showOutput{Digest: d, LogicalBytes: m.LogicalBytes(), Warnings: []string{}, Manifest: m}
		if m.File("config.json") != nil {
			cfg, err := restorer.ReadSmallFile(st, m, "config.json", 16<<20)
			if err != nil {
				return err
			}
			if w := archiver.DTypeMismatch(cfg, m.Tensors); w != "" {
				out.Warnings = append(out.Warnings, w)
			}
		}
		// The format's own view (a GGUF file's key/values, an MPK archive's
		// pipeline stages), when its codec has one.
		var details *formats.Details
		if c, ok := codecs.ByName(m.Format); ok {
			if describe, ok := c.(formats.Describer); ok {
				if details, err = describe.Describe(m); err != nil {
					return err
				}
			}
		}
		if c.Bool("sha256") {
			sums, err := restorer.HashFiles(c.Context, st, m, sha256.New)
			if err != nil {
				return err
			}
			out.SHA256 = map[string]string{}
			for p, sum := range sums {
				out.SHA256[p] = "sha256:" + hex.EncodeToString(sum)
			}
		}
		detailText := renderDetails(details)
		if details != nil {
			out.Details = details.Data
		}
		if e.json {
			return e.streamJSON(out.writeJSON)
		}
		if e.quiet {
			e.result("%s\n", d) // what a script resolves a name for
			return nil
		}
		e.printf("version %s\nformat  %s\nsize    %s in %s, %s\n", d, safe(m.Format), humanBytes(out.LogicalBytes), plural(len(m.Files), "file"), plural(len(m.Tensors), "tensor"))
		// Where it came from (a layout's metadata: hub revision, ollama
		// name); a long value (a recorded manifest) by its length.
		for _, k := range slices.Sorted(maps.Keys(m.Meta)) {
			v := m.Meta[k]
			if len(v) > 120 {
				v = fmt.Sprintf("(%d bytes)", len(v))
			}
			e.printf("from    %s = %s\n", safe(k), safe(v))
		}
		for _, w := range out.Warnings {
			e.printf("warning %s\n", safe(w))
		}
		if detailText != "" {
			e.printf("\n%s", detailText)
		}
		e.printf("\n")
		err = printTable(e.stdout, func(emit func(...string)) {
			head := []string{"FILE", "ROLE", "SIZE", "DIGEST"}
			if out.SHA256 != nil {
				head = append(head, "SHA256")
			}
			emit(head...)
			for _, f := range m.Files {
				row := []string{safe(f.Path), safe(string(f.Role)), humanBytes(f.Size), f.Digest.Short()}
				if out.SHA256 != nil {
					row = append(row, out.SHA256[f.Path])
				}
				emit(row...)
			}
		})
		if err != nil {
			return err
		}
		e.printf("\n")
		return printTable(e.stdout, func(emit func(...string)) {
			emit("TENSOR", "DTYPE", "SHAPE", "SIZE", "DIGEST")
			for _, t := range m.Tensors {
				emit(safe(t.Name), safe(t.DType), shapeString(t.Shape), humanBytes(t.Size), t.Digest.Short())
			}
		})
	},
}

func shapeString(s []int64) string {
	b := append(make([]byte, 0, 2+8*len(s)), '[')
	for i, v := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, v, 10)
	}
	return string(append(b, ']'))
}

func itoa(n int) string { return fmt.Sprint(n) }
