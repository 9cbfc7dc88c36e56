package formats

import "fmt"

// Details is a format's own view of a version (show) or of what changed
// between two versions (diff), as data the CLI prints: Blocks for people,
// Data for --json.
type Details struct {
	Blocks []Block
	Data   any
}

// Block is a line or a table of show or diff text. A line is Format, the
// codec's own words, with one %s verb per Value. A table is Rows (the first
// may be a header), printed aligned and indented by Indent spaces.
type Block struct {
	Format string
	Values []Value
	Rows   [][]Value
	Indent int
}

// Value is a string from a model file or a user, which the CLI makes safe
// for a terminal before printing it (control characters, bidi overrides
// and invalid UTF-8 escaped). Clip > 0 cuts it to that many bytes, saying
// so; Lines keeps its newlines and tabs (a chat template), indenting the
// lines after the first by Indent spaces. A Value with IsSize is a byte
// count, printed as a human size.
type Value struct {
	S      string
	Clip   int
	Lines  bool
	Indent int
	Size   int64
	IsSize bool
}

// V is a Value of s.
func V(s string) Value { return Value{S: s} }

// Vf is a Value of a formatted string.
func Vf(format string, args ...any) Value { return Value{S: fmt.Sprintf(format, args...)} }

// Clip is a Value of s cut to at most n bytes.
func Clip(s string, n int) Value { return Value{S: s, Clip: n} }

// Size is a Value of a byte count.
func Size(n int64) Value { return Value{Size: n, IsSize: true} }

// Line is a line block: format with a %s verb per value, ending in "\n".
func Line(format string, values ...Value) Block { return Block{Format: format, Values: values} }

// Table is a table block of rows, indented by indent spaces.
func Table(indent int, rows ...[]Value) Block { return Block{Rows: rows, Indent: indent} }
