package main

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSafe(t *testing.T) {
	for _, c := range []struct{ in, want, lines string }{
		{"model.layers.0.weight", "model.layers.0.weight", "model.layers.0.weight"},
		{"a\x1b[31mb", `a\x1b[31mb`, `a\x1b[31mb`},
		{"bell\x07", `bell\x07`, `bell\x07`},
		{"a\nb\tc\rd", `a\nb\tc\rd`, "a\nb\tc\\rd"},
		{"del\x7f", `del\x7f`, `del\x7f`},
		{"csi\u009b2J", `csi\u009b2J`, `csi\u009b2J`},
		{"rlo\u202eabc\u2066x\u2069", `rlo\u202eabc\u2066x\u2069`, `rlo\u202eabc\u2066x\u2069`},
		{"bad\xff\xfeutf8", `bad\xff\xfeutf8`, `bad\xff\xfeutf8`},
		{"▁the ünïcödé 中文", "▁the ünïcödé 中文", "▁the ünïcödé 中文"},
	} {
		if got := safe(c.in); got != c.want {
			t.Errorf("safe(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := safeLines(c.in); got != c.lines {
			t.Errorf("safeLines(%q) = %q, want %q", c.in, got, c.lines)
		}
	}
}

func TestSafeClipped(t *testing.T) {
	if got := safeClipped("short", 10); got != "short" {
		t.Errorf("safeClipped(short) = %q", got)
	}
	long := strings.Repeat("é", 100) + "\x1b"
	got := safeClipped(long, 11) // cuts inside the sixth é
	if want := strings.Repeat("é", 5) + "… (201 bytes)"; got != want {
		t.Errorf("safeClipped = %q, want %q", got, want)
	}
}

// TestSafeLeavesNoControl checks every rune up to U+FFFF and every byte:
// what safe returns is valid UTF-8 without a C0, DEL, C1 or bidi control.
func TestSafeLeavesNoControl(t *testing.T) {
	var b strings.Builder
	for r := rune(0); r < 0x10000; r++ {
		b.WriteRune(r)
	}
	for c := 0x80; c < 0x100; c++ {
		b.WriteByte(byte(c)) // lone continuation and lead bytes
	}
	out := safe(b.String())
	if !utf8.ValidString(out) {
		t.Fatal("safe returned invalid UTF-8")
	}
	for _, r := range out {
		if r < 0x20 || r == 0x7f || isTerminalControl(r) {
			t.Fatalf("safe left %U in its output", r)
		}
	}
}
