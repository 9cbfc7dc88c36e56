package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"text/tabwriter"
)

// printTable prints what a tabwriter with show's settings printed, for
// tables of any shape: empty cells, cells of several-byte runes, one
// column, one row.
func TestPrintTableIsTabwriters(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"", "a", "model.layers.0.weight", "é", "中文", "[128,4]", "512 B", "db76436accf4", "x y", `\x01`}
	for n := range 200 {
		cols, nrows := 1+r.IntN(5), 1+r.IntN(12)
		table := make([][]string, nrows)
		for i := range table {
			for range cols {
				table[i] = append(table[i], strings.Repeat(pieces[r.IntN(len(pieces))], r.IntN(3)))
			}
		}
		var want bytes.Buffer
		tw := tabwriter.NewWriter(&want, 0, 4, 2, ' ', 0)
		for _, row := range table {
			fmt.Fprintf(tw, "%s\n", strings.Join(row, "\t"))
		}
		if err := tw.Flush(); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		err := printTable(&got, func(emit func(...string)) {
			for _, row := range table {
				emit(row...)
			}
		})
		if err != nil || got.String() != want.String() {
			t.Fatalf("table %d %q: err %v\n got %q\nwant %q", n, table, err, got.String(), want.String())
		}
	}
}

// A write that fails ends the table with its error: the first (a short
// table, written at its end), or one in the middle of a long one, after
// which nothing more is written.
func TestPrintTableWriteError(t *testing.T) {
	for _, c := range []struct {
		rows, failAfter int
	}{{3, 0}, {1000, 1}} {
		w := &failAfter{n: c.failAfter}
		err := printTable(w, func(emit func(...string)) {
			for range c.rows {
				emit(strings.Repeat("a", 200), "b")
			}
		})
		if err == nil || w.writes != c.failAfter+1 {
			t.Errorf("%d rows: err %v after %d writes, want write %d's error", c.rows, err, w.writes, c.failAfter+1)
		}
	}
}

type failAfter struct{ n, writes int }

func (f *failAfter) Write(p []byte) (int, error) {
	f.writes++
	if f.writes > f.n {
		return 0, fmt.Errorf("disk full")
	}
	return len(p), nil
}

func TestShapeString(t *testing.T) {
	for _, c := range []struct {
		shape []int64
		want  string
	}{
		{nil, "[]"}, {[]int64{}, "[]"}, {[]int64{0}, "[0]"}, {[]int64{65536, 1024}, "[65536,1024]"}, {[]int64{1, -1, 9223372036854775807}, "[1,-1,9223372036854775807]"},
	} {
		if got := shapeString(c.shape); got != c.want {
			t.Errorf("shapeString(%v) = %q, want %q", c.shape, got, c.want)
		}
	}
}
