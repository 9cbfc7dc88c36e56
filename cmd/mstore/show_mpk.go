package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/mstore/mstore/formats/mpk"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/objects"
	"github.com/mstore/mstore/store"
)

func init() {
	formatDetails["mpk"] = showMPK
	formatDiffs["mpk"] = diffMPK
}

// mpkView is show's view of an MPK archive: the archive as added, its
// contracts, and the pipeline's stages in the order they run.
type mpkView struct {
	Path          string         `json:"path"`
	TarBytes      int64          `json:"tar_bytes"`
	ArchiveBytes  int64          `json:"archive_bytes"`
	ArchiveSHA256 string         `json:"archive_sha256"`
	ArchiveDigest string         `json:"archive_digest"`
	Contracts     []mpk.Contract `json:"contracts"`
	Stages        []mpk.Stage    `json:"stages"`
}

// showMPK prints each archive's contracts and its pipeline's stages in
// their stable order (ascending sequence_id, then position in the file).
func showMPK(_ *store.Store, m *objects.Manifest) (string, any, error) {
	var b strings.Builder
	var views []mpkView
	for _, f := range m.Files {
		if f.Role != objects.RoleContainer || f.Meta[mpk.MetaStages] == "" {
			continue
		}
		v := mpkView{Path: f.Path, TarBytes: f.Size, ArchiveSHA256: f.Meta[mpk.MetaArchiveSHA256], ArchiveDigest: f.Meta[mpk.MetaArchiveDigest]}
		v.ArchiveBytes, _ = strconv.ParseInt(f.Meta[mpk.MetaArchiveBytes], 10, 64)
		if err := json.Unmarshal([]byte(f.Meta[mpk.MetaContracts]), &v.Contracts); err != nil {
			return "", nil, errs.Wrap(errs.IntegrityError, "show", err, "%s: the recorded MPK contracts do not decode", f.Path)
		}
		if err := json.Unmarshal([]byte(f.Meta[mpk.MetaStages]), &v.Stages); err != nil {
			return "", nil, errs.Wrap(errs.IntegrityError, "show", err, "%s: the recorded pipeline stages do not decode", f.Path)
		}
		views = append(views, v)

		fmt.Fprintf(&b, "MPK archive %s: a %d-byte tar stream, added as %d bytes of gzip (sha256 %s);\n", safe(v.Path), v.TarBytes, v.ArchiveBytes, safe(v.ArchiveSHA256))
		b.WriteString("  checkout writes the same tar stream, compressed canonically\n")
		for _, c := range v.Contracts {
			fmt.Fprintf(&b, "contract %s: version %s\n", safe(c.Member), safe(c.Version))
		}
		fmt.Fprintf(&b, "pipeline: %d stages, in the order they run\n", len(v.Stages))
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "  SEQ\tSTAGE\tKERNEL\tPROCESSOR\tPLUGIN\tCONFIG\tINPUT\n")
		for _, s := range v.Stages {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", s.SequenceID, safeClipped(s.Name, 200), safeClipped(s.Kernel, 200), safeClipped(s.Processor, 200), safeClipped(s.PluginID, 200), safeClipped(s.ConfigPath, 200), safeClipped(strings.Join(s.Input, ","), 400))
		}
		tw.Flush()
	}
	if views == nil {
		return "", nil, nil
	}
	return b.String(), map[string]any{"mpk": views}, nil
}

// mpkRecord returns the pipeline stages and contracts recorded for the
// archive of m, as JSON text ("" when there is none).
func mpkRecord(m *objects.Manifest) (stages, contracts string) {
	for _, f := range m.Files {
		if f.Role == objects.RoleContainer && f.Meta[mpk.MetaStages] != "" {
			return f.Meta[mpk.MetaStages], f.Meta[mpk.MetaContracts]
		}
	}
	return "", ""
}

// stageLine is a pipeline's stages in order, on one line.
func stageLine(stagesJSON string) string {
	var stages []mpk.Stage
	if stagesJSON == "" || json.Unmarshal([]byte(stagesJSON), &stages) != nil {
		return "(none)"
	}
	parts := make([]string, len(stages))
	for i, st := range stages {
		parts[i] = fmt.Sprintf("%d %s (%s)", st.SequenceID, safe(st.Name), safe(st.Kernel))
	}
	return strings.Join(parts, " → ")
}

// diffMPK says whether the pipeline (its stages in order, with every field)
// and the contracts changed; the members themselves are compared as
// tensors.
func diffMPK(_ *store.Store, a, b *objects.Manifest) (string, any, error) {
	stagesA, contractsA := mpkRecord(a)
	stagesB, contractsB := mpkRecord(b)
	var text strings.Builder
	if stagesA == stagesB {
		text.WriteString("= pipeline unchanged\n")
	} else {
		fmt.Fprintf(&text, "~ pipeline\n  - %s\n  + %s\n", stageLine(stagesA), stageLine(stagesB))
	}
	if contractsA == contractsB {
		text.WriteString("= contracts unchanged\n")
	} else {
		fmt.Fprintf(&text, "~ contracts\n  - %s\n  + %s\n", safe(contractsA), safe(contractsB))
	}
	return text.String(), map[string]bool{"pipeline_changed": stagesA != stagesB, "contracts_changed": contractsA != contractsB}, nil
}
