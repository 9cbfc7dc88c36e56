package main

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// safe returns s as human output may show it: names, key/values, messages
// and paths come from model files and users, and a terminal would act on
// their control characters (ESC sequences recolour, retitle or hide text;
// BEL rings; bidi overrides reorder what is read). Every C0 control, DEL,
// every C1 control (U+0080–U+009F), the bidi embeddings, overrides,
// isolates and marks, and each byte of invalid UTF-8 are written as Go
// escapes (\x1b, \n, \u202e); the rest is kept as it is. JSON output
// never goes through safe: it carries the exact strings.
func safe(s string) string { return escapeTerminal(s, false) }

// safeLines is safe for a multi-line value shown deliberately (a chat
// template): newlines and tabs are kept.
func safeLines(s string) string { return escapeTerminal(s, true) }

func escapeTerminal(s string, keepLines bool) string {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x7f {
		i++
	}
	if i == len(s) {
		return s // the common case: printable ASCII
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			switch r {
			case '\n':
				b.WriteString(`\n`)
			case '\t':
				b.WriteString(`\t`)
			case '\r':
				b.WriteString(`\r`)
			default:
				b.WriteString(`\x`)
				b.WriteString(hex2(byte(r)))
			}
		case isTerminalControl(r):
			q := strconv.QuoteRuneToASCII(r) // '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// isTerminalControl reports the non-ASCII runes a terminal acts on or
// that change how the text around them reads: C1 controls, and the
// Unicode bidi controls (Trojan Source, CVE-2021-42574).
func isTerminalControl(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f: // C1, CSI (U+009B) included
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069: // embeddings, overrides, isolates
		return true
	case r == 0x200e || r == 0x200f || r == 0x061c: // LRM, RLM, ALM
		return true
	}
	return false
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}

// safeClipped is safe of at most the first n bytes of s, saying how long
// s is when it is cut: free text from a model file (a producer name, a
// stage's field) may be megabytes, which --json shows whole.
func safeClipped(s string, n int) string {
	if len(s) <= n {
		return safe(s)
	}
	return safe(strings.ToValidUTF8(s[:n], "")) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}
