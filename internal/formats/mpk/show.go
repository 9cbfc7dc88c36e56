package mpk

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

// mpkView is show's view of an MPK archive: the archive as added, its
// contracts, and the pipeline's stages in the order they run.
type mpkView struct {
	Path          string     `json:"path"`
	TarBytes      int64      `json:"tar_bytes"`
	ArchiveBytes  int64      `json:"archive_bytes"`
	ArchiveSHA256 string     `json:"archive_sha256"`
	ArchiveDigest string     `json:"archive_digest"`
	Contracts     []Contract `json:"contracts"`
	Stages        []Stage    `json:"stages"`
}

// Describe prints each archive's contracts and its pipeline's stages in
// their stable order (ascending sequence_id, then position in the file).
func (codec) Describe(m *objects.Manifest) (*formats.Details, error) {
	var blocks []formats.Block
	var views []mpkView
	for _, f := range m.Files {
		if f.Role != objects.RoleContainer || f.Meta[MetaStages] == "" {
			continue
		}
		v := mpkView{Path: f.Path, TarBytes: f.Size, ArchiveSHA256: f.Meta[MetaArchiveSHA256], ArchiveDigest: f.Meta[MetaArchiveDigest]}
		v.ArchiveBytes, _ = strconv.ParseInt(f.Meta[MetaArchiveBytes], 10, 64)
		if err := json.Unmarshal([]byte(f.Meta[MetaContracts]), &v.Contracts); err != nil {
			return nil, errs.Wrap(errs.IntegrityError, "show", err, "%s: the recorded MPK contracts do not decode", f.Path)
		}
		if err := json.Unmarshal([]byte(f.Meta[MetaStages]), &v.Stages); err != nil {
			return nil, errs.Wrap(errs.IntegrityError, "show", err, "%s: the recorded pipeline stages do not decode", f.Path)
		}
		views = append(views, v)

		blocks = append(blocks,
			formats.Line("MPK archive %s: a %s-byte tar stream, added as %s bytes of gzip (sha256 %s);",
				formats.V(v.Path), formats.Vf("%d", v.TarBytes), formats.Vf("%d", v.ArchiveBytes), formats.V(v.ArchiveSHA256)),
			formats.Line("  checkout writes the same tar stream, compressed canonically"))
		for _, c := range v.Contracts {
			blocks = append(blocks, formats.Line("contract %s: version %s", formats.V(c.Member), formats.V(c.Version)))
		}
		blocks = append(blocks, formats.Line("pipeline: %s stages, in the order they run", formats.Vf("%d", len(v.Stages))))
		rows := [][]formats.Value{{formats.V("SEQ"), formats.V("STAGE"), formats.V("KERNEL"), formats.V("PROCESSOR"), formats.V("PLUGIN"), formats.V("CONFIG"), formats.V("INPUT")}}
		for _, s := range v.Stages {
			rows = append(rows, []formats.Value{formats.Vf("%d", s.SequenceID), formats.Clip(s.Name, 200), formats.Clip(s.Kernel, 200),
				formats.Clip(s.Processor, 200), formats.Clip(s.PluginID, 200), formats.Clip(s.ConfigPath, 200), formats.Clip(strings.Join(s.Input, ","), 400)})
		}
		blocks = append(blocks, formats.Table(2, rows...))
	}
	if views == nil {
		return nil, nil
	}
	return &formats.Details{Blocks: blocks, Data: map[string]any{"mpk": views}}, nil
}

// mpkRecord returns the pipeline stages and contracts recorded for the
// archive of m, as JSON text ("" when there is none).
func mpkRecord(m *objects.Manifest) (stages, contracts string) {
	for _, f := range m.Files {
		if f.Role == objects.RoleContainer && f.Meta[MetaStages] != "" {
			return f.Meta[MetaStages], f.Meta[MetaContracts]
		}
	}
	return "", ""
}

// stageLine is a pipeline's stages in order, on one line.
func stageLine(stagesJSON string) string {
	var stages []Stage
	if stagesJSON == "" || json.Unmarshal([]byte(stagesJSON), &stages) != nil {
		return "(none)"
	}
	parts := make([]string, len(stages))
	for i, st := range stages {
		parts[i] = fmt.Sprintf("%d %s (%s)", st.SequenceID, st.Name, st.Kernel)
	}
	return strings.Join(parts, " → ")
}

// Diff says whether the pipeline (its stages in order, with every field)
// and the contracts changed; the members themselves are compared as
// tensors.
func (codec) Diff(a, b *objects.Manifest) (*formats.Details, error) {
	stagesA, contractsA := mpkRecord(a)
	stagesB, contractsB := mpkRecord(b)
	var blocks []formats.Block
	if stagesA == stagesB {
		blocks = append(blocks, formats.Line("= pipeline unchanged"))
	} else {
		blocks = append(blocks, formats.Line("~ pipeline\n  - %s\n  + %s", formats.V(stageLine(stagesA)), formats.V(stageLine(stagesB))))
	}
	if contractsA == contractsB {
		blocks = append(blocks, formats.Line("= contracts unchanged"))
	} else {
		blocks = append(blocks, formats.Line("~ contracts\n  - %s\n  + %s", formats.V(contractsA), formats.V(contractsB)))
	}
	return &formats.Details{Blocks: blocks, Data: map[string]bool{"pipeline_changed": stagesA != stagesB, "contracts_changed": contractsA != contractsB}}, nil
}
