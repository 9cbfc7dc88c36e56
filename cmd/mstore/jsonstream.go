package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
)

// A command's --json document is printed as printJSON prints it, but a
// document that holds a whole manifest (show) or a line per tensor (diff)
// is written a piece at a time rather than encoded whole first:
// encoding/json held `show --json` of a model of 100,000 tensors three
// times over (the encoding, its indented copy, the decoded manifest), 209
// MB, and took 1.2 s.

// indenter is json.Indent(dst, src, "", "  ") as a stream: the compact
// JSON written to it (encoding/json's output, in pieces cut anywhere) goes
// on to w indented byte for byte as json.Encoder with SetIndent("", "  ")
// indents it.
type indenter struct {
	w        *bufio.Writer
	depth    int
	inString bool
	escaped  bool // the byte before was a backslash in a string
	// open: a '{' or '[' was written and its first member not yet, so that
	// an empty object or array stays {} or [].
	open bool
}

func (ix *indenter) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if ix.inString {
			// The rest of the string up to its next quote or backslash as
			// it is.
			j := i
			for j < len(p) && p[j] != '"' && p[j] != '\\' && !ix.escaped {
				j++
			}
			if j > i {
				ix.w.Write(p[i:j])
				i = j - 1
				continue
			}
			switch {
			case ix.escaped:
				ix.escaped = false
			case c == '\\':
				ix.escaped = true
			case c == '"':
				ix.inString = false
			}
			ix.w.WriteByte(c)
			continue
		}
		if ix.open && c != '}' && c != ']' {
			ix.open = false
			ix.depth++
			ix.newline()
		}
		switch c {
		case '"':
			ix.inString = true
			ix.w.WriteByte(c)
		case '{', '[':
			ix.open = true
			ix.w.WriteByte(c)
		case ',':
			ix.w.WriteByte(c)
			ix.newline()
		case ':':
			ix.w.WriteString(": ")
		case '}', ']':
			if ix.open {
				ix.open = false
			} else {
				ix.depth--
				ix.newline()
			}
			ix.w.WriteByte(c)
		default:
			ix.w.WriteByte(c)
		}
	}
	// A failed write (a closed pipe) is kept by w: an empty write reports
	// it, so that the document stops being made.
	if _, err := ix.w.Write(nil); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (ix *indenter) newline() {
	ix.w.WriteByte('\n')
	for range ix.depth {
		ix.w.WriteString("  ")
	}
}

// jsonDoc writes one JSON object a member at a time, through an indenter.
type jsonDoc struct {
	ix      *indenter
	members int
	buf     bytes.Buffer // compactJSON's
	err     error
}

// streamJSON prints the object that members writes as the command's one
// JSON document, as printJSON would print it.
func (e *env) streamJSON(members func(d *jsonDoc)) error {
	bw := bufio.NewWriterSize(e.stdout, 64<<10)
	d := &jsonDoc{ix: &indenter{w: bw}}
	d.write([]byte("{"))
	members(d)
	d.write([]byte("}\n")) // as json.Encoder ends a document
	if err := bw.Flush(); d.err == nil {
		d.err = err
	}
	return d.err
}

// field writes the member name: v.
func (d *jsonDoc) field(name string, v any) {
	d.key(name)
	d.value(v)
}

// stream writes the member name, whose value write writes, compact.
func (d *jsonDoc) stream(name string, write func(io.Writer) error) {
	d.key(name)
	if d.err == nil {
		d.err = write(d.ix)
	}
}

func (d *jsonDoc) key(name string) {
	if d.members > 0 {
		d.write([]byte(","))
	}
	d.members++
	d.value(name)
	d.write([]byte(":"))
}

// write passes b to the indenter, unless a write failed before.
func (d *jsonDoc) write(b []byte) {
	if d.err == nil {
		_, d.err = d.ix.Write(b)
	}
}

// value writes v's compact encoding: what encoding/json writes for it
// with SetEscapeHTML(false), as printJSON's encoder does.
func (d *jsonDoc) value(v any) {
	if d.err != nil {
		return
	}
	d.buf.Reset()
	enc := json.NewEncoder(&d.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		if d.err == nil {
			d.err = err
		}
		return
	}
	d.write(bytes.TrimSuffix(d.buf.Bytes(), []byte("\n")))
}

// streamArray writes the member name: s, an element at a time; a nil s is
// null, as encoding/json writes it.
func streamArray[T any](d *jsonDoc, name string, s []T) {
	if s == nil {
		d.field(name, nil)
		return
	}
	d.key(name)
	d.write([]byte("["))
	for i := 0; i < len(s) && d.err == nil; i++ {
		if i > 0 {
			d.write([]byte(","))
		}
		d.value(&s[i])
	}
	d.write([]byte("]"))
}
