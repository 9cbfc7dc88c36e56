package gguf

import (
	"testing"

	"github.com/mstore/mstore/internal/errs"
)

// FuzzParseSPM: any bytes as tokenizer.model parse or are refused with a
// class, never panic; what parses writes back to pieces that parse the same.
func FuzzParseSPM(f *testing.F) {
	f.Add(writeSPM([]piece{{"<unk>", 0, typeUnknown}, {"▁a", -1.5, typeNormal}, {"<0x00>", 0, typeByte}}, 0, -1, -1))
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		pieces, err := parseSPM(b)
		if err != nil {
			if errs.ClassOf(err) == 0 {
				t.Fatalf("unclassed error %v", err)
			}
			return
		}
		again, err := parseSPM(writeSPM(pieces, -1, -1, -1))
		if err != nil || len(again) != len(pieces) {
			t.Fatalf("rewritten: %v", err)
		}
		for i := range pieces {
			if again[i].text != pieces[i].text || again[i].typ != pieces[i].typ {
				t.Fatalf("piece %d: %+v → %+v", i, pieces[i], again[i])
			}
		}
	})
}
