package main

import (
	"bufio"
	"io"
	"strings"
	"unicode/utf8"
)

// printTable prints a table as tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
// prints its rows written with tab-separated cells: each cell but a row's
// last padded with spaces to the width of its column's widest cell, and
// two more. rows calls emit once a row, the same rows each time it is
// called: printTable calls it twice, to measure the columns and then to
// print, rather than holding the table. show printed 100,000 tensors
// through a tabwriter, which held every cell until its Flush and grew its
// buffers the while: most of that show's time. Cells must not hold what
// a tabwriter reads as markup ('\t', '\v', '\f', '\n', 0xff); what the
// commands print in tables has been through safe, or is a number or a
// digest. Every row has as many cells as the first.
func printTable(w io.Writer, rows func(emit func(cells ...string))) error {
	var widths []int
	rows(func(cells ...string) {
		if widths == nil {
			widths = make([]int, len(cells))
		}
		for i, c := range cells[:len(cells)-1] {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	})
	// Lines are gathered here too: on a terminal, output writes each
	// straight through, a write(2) a tensor.
	bw := bufio.NewWriterSize(w, 64<<10)
	var err error
	var line []byte
	rows(func(cells ...string) {
		if err != nil {
			return
		}
		line = line[:0]
		for i, c := range cells[:len(cells)-1] {
			line = append(line, c...)
			line = append(line, strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+2)...)
		}
		line = append(append(line, cells[len(cells)-1]...), '\n')
		_, err = bw.Write(line)
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}
