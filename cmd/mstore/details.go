package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/mstore/mstore/internal/formats"
)

// renderDetails prints a format's details (formats.Details) for people:
// the codec chose what to say, and every value from a model file is made
// safe here.
func renderDetails(d *formats.Details) string {
	if d == nil {
		return ""
	}
	var b strings.Builder
	for _, bl := range d.Blocks {
		if bl.Rows == nil {
			args := make([]any, len(bl.Values))
			for i, v := range bl.Values {
				args[i] = renderValue(v)
			}
			fmt.Fprintf(&b, bl.Format+"\n", args...)
			continue
		}
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		pad := strings.Repeat(" ", bl.Indent)
		for _, row := range bl.Rows {
			cells := make([]string, len(row))
			for i, v := range row {
				cells[i] = renderValue(v)
			}
			fmt.Fprintf(tw, "%s%s\n", pad, strings.Join(cells, "\t"))
		}
		tw.Flush()
	}
	return b.String()
}

func renderValue(v formats.Value) string {
	switch {
	case v.IsSize:
		return humanBytes(v.Size)
	case v.Lines:
		return strings.ReplaceAll(safeLines(v.S), "\n", "\n"+strings.Repeat(" ", v.Indent))
	case v.Clip > 0:
		return safeClipped(v.S, v.Clip)
	}
	return safe(v.S)
}
