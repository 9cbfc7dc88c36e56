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

func init() { formatDetails["mpk"] = showMPK }

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

		fmt.Fprintf(&b, "MPK archive %s: a %d-byte tar stream, added as %d bytes of gzip (sha256 %s);\n", v.Path, v.TarBytes, v.ArchiveBytes, v.ArchiveSHA256)
		b.WriteString("  checkout writes the same tar stream, compressed canonically\n")
		for _, c := range v.Contracts {
			fmt.Fprintf(&b, "contract %s: version %s\n", c.Member, c.Version)
		}
		fmt.Fprintf(&b, "pipeline: %d stages, in the order they run\n", len(v.Stages))
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "  SEQ\tSTAGE\tKERNEL\tPROCESSOR\tPLUGIN\tCONFIG\tINPUT\n")
		for _, s := range v.Stages {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", s.SequenceID, s.Name, s.Kernel, s.Processor, s.PluginID, s.ConfigPath, strings.Join(s.Input, ","))
		}
		tw.Flush()
	}
	if views == nil {
		return "", nil, nil
	}
	return b.String(), map[string]any{"mpk": views}, nil
}
