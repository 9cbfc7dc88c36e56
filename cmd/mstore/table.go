package main

import (
	"bufio"
	"io"
	"unicode/utf8"
)

// printTable prints a table as tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
// prints its rows written with tab-separated cells: each cell but a row's
// last padded with spaces to the width of its column's widest cell, and
// two more. rows calls emit once a row, the same rows each time it is
// called: printTable calls it twice, to measure the columns and then to
// print, rather than holding the table, and writes its lines through a
// buffer of its own. show printed 100,000 tensors through a tabwriter,
// which held every cell until its Flush and then wrote a cell at a time:
// on a terminal, where output writes each write through, 2.7-3.3 s (on a
// pseudo-terminal; 0.33-0.48 s now). Cells must not hold what a tabwriter reads as markup ('\t', '\v',
// '\f', '\n', 0xff); what the commands print in tables has been through
// safe, or is a number or a digest. The rows should have as many cells
// each: the columns of rows of other lengths are not a tabwriter's.
func printTable(w io.Writer, rows func(emit func(cells ...string))) error {
	var widths []int
	rows(func(cells ...string) {
		for i := 0; i+1 < len(cells); i++ {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(cells[i]))
		}
	})
	bw := bufio.NewWriterSize(w, 64<<10)
	var err error
	var line []byte
	rows(func(cells ...string) {
		if err != nil {
			return
		}
		line = line[:0]
		for i, c := range cells {
			line = append(line, c...)
			if i+1 < len(cells) {
				for range widths[i] - utf8.RuneCountInString(c) + 2 {
					line = append(line, ' ')
				}
			}
		}
		_, err = bw.Write(append(line, '\n'))
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}
