package safetensors

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/formats"
)

// tiny splits headers of any size into up to k parts where cutPoints says.
func tiny(k int) splitter { return splitter{min: 1, parts: k, cuts: cutPoints} }

// cutsAt cuts every header at the offsets at.
func cutsAt(at ...int) splitter {
	return splitter{min: 1, parts: len(at) + 1, cuts: func([]byte, int) []int { return at }}
}

// checkSame reads hdr serially and as s cuts it, each with a fresh budget
// of limit bytes (0: the default one; -1: no budget), and fails t unless
// both give the same header or the same error (class, message, offset)
// and charge the same. It reports whether s's parts read hdr, and fails t
// when they did for a header that the serial parse refuses.
func checkSame(t testing.TB, s splitter, hdr []byte, dataLen int64, limit int64) bool {
	t.Helper()
	budget := func() *formats.Budget {
		if limit < 0 {
			return nil
		}
		return formats.Limits{MaxParseMemory: limit}.Budget(pkg, "m.safetensors", int64(len(hdr)))
	}
	b1, b2, b3 := budget(), budget(), budget()
	want, wantErr := parseSerial("m.safetensors", hdr, dataLen, b1)
	got, gotErr := s.header("m.safetensors", hdr, dataLen, b2)
	if !reflect.DeepEqual(wantErr, gotErr) {
		t.Fatalf("%q: error\n got %v\nwant %v", hdr, gotErr, wantErr)
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("%q: header\n got %+v\nwant %+v", hdr, got, want)
	}
	if b1.Used() != b2.Used() {
		t.Fatalf("%q: charged %d, the serial parse %d", hdr, b2.Used(), b1.Used())
	}
	cuts := s.cutsOf(hdr)
	if cuts == nil {
		return false
	}
	fast := s.parse("m.safetensors", hdr, cuts, dataLen, b3)
	if fast == nil {
		return false
	}
	if wantErr != nil {
		t.Fatalf("%q: the parts read a header the serial parse refuses (%v)", hdr, wantErr)
	}
	if !reflect.DeepEqual(want, fast) || b3.Used() != b1.Used() {
		t.Fatalf("%q: the parts read\n%+v, charged %d\nthe serial parse\n%+v, charged %d", hdr, fast, b3.Used(), want, b1.Used())
	}
	return true
}

// testHeader is the JSON of a header whose tensors are named names, one
// U8 byte each (so dataLen is len(names)), with sep between members and
// meta (a member, "" for none) before the member at metaAt.
func testHeader(names []string, sep, meta string, metaAt int) ([]byte, int64) {
	var members []string
	for i, n := range names {
		if i == metaAt && meta != "" {
			members = append(members, meta)
		}
		members = append(members, fmt.Sprintf(`%s:{"dtype":"U8","shape":[1],"data_offsets":[%d,%d]}`, strconv.Quote(n), i, i+1))
	}
	if metaAt >= len(names) && meta != "" {
		members = append(members, meta)
	}
	return []byte("{" + strings.Join(members, sep) + "}  "), int64(len(names))
}

func names(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// topCommas are the offsets of the commas between hdr's top-level members,
// by a scan of its own (strings, escapes, depth).
func topCommas(hdr []byte) []int {
	var out []int
	depth, inString := 0, false
	for i := 0; i < len(hdr); i++ {
		switch c := hdr[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		case c == ',' && depth == 1:
			out = append(out, i)
		}
	}
	return out
}

const meta = `"__metadata__":{"format":"pt","a},\"b":"x\u00e9\ud83d\ude00"}`

func TestSplitReadsValidHeaders(t *testing.T) {
	tricky := []string{"a", `b},"c`, `d},`, `e\"`, "f\u00e9", `g\u`, "h/\\", "i\U0001F600", `j"},"k":{`}
	for _, c := range []struct {
		name  string
		names []string
		sep   string
		meta  string
		at    int
	}{
		{"plain", names(40, "model.layers."), ",", "", 0},
		{"metadata first", names(40, "w"), ",", meta, 0},
		{"metadata in the middle", names(40, "w"), ",", meta, 20},
		{"metadata last", names(40, "w"), ",", meta, 40},
		{"metadata null", names(40, "w"), ",", `"__metadata__":null`, 30},
		{"white space", names(40, "w"), " ,\n\t ", meta, 25},
		{"tricky names", append(names(30, "w"), tricky...), ",", "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			hdr, dataLen := testHeader(c.names, c.sep, c.meta, c.at)
			for _, k := range []int{2, 3, 4, 8} {
				if !checkSame(t, tiny(k), hdr, dataLen, 0) && c.name != "tricky names" {
					t.Fatalf("%d parts fell back on a valid header", k)
				}
			}
			// Cut at every byte: only a top-level comma may be read in parts,
			// and it must be.
			top := map[int]bool{}
			for _, at := range topCommas(hdr) {
				top[at] = true
			}
			for at := -1; at <= len(hdr); at++ {
				if fast := checkSame(t, cutsAt(at), hdr, dataLen, 0); fast != top[at] {
					t.Fatalf("cut at %d (%q|%q): read in parts %v, a top-level comma %v", at, hdr[:max(at, 0)], hdr[min(max(at, 0), len(hdr)):], fast, top[at])
				}
			}
			commas := topCommas(hdr)
			for i := range commas {
				for j := i + 1; j < len(commas); j += 7 {
					if !checkSame(t, cutsAt(commas[i], commas[j]), hdr, dataLen, 0) {
						t.Fatalf("cuts at %d and %d fell back", commas[i], commas[j])
					}
				}
			}
			if !checkSame(t, tiny(3), hdr, dataLen, -1) && c.name != "tricky names" {
				t.Fatal("fell back without a budget")
			}
			for n := range hdr { // truncated at every byte
				checkSame(t, tiny(2), hdr[:n], dataLen, 0)
				checkSame(t, tiny(3), hdr[:n], dataLen, 0)
			}
		})
	}
}

func TestSplitRefusesAsSerial(t *testing.T) {
	ns := names(40, "w")
	dupAcross := append(append([]string{}, ns...), "w3")
	dupWithin := append(append([]string{}, ns[:20]...), "w21", "w21")
	dupWithin = append(dupWithin, ns[22:]...)
	cases := map[string][]byte{}
	cases["duplicate across the cut"], _ = testHeader(dupAcross, ",", "", 0)
	cases["duplicate within a part"], _ = testHeader(dupWithin, ",", "", 0)
	m1, _ := testHeader(ns, ",", meta, 2)
	cases["metadata twice"] = bytes.Replace(m1, []byte(`"w35"`), []byte(`"__metadata__":null,"w35"`), 1)
	bad, _ := testHeader(ns, ",", meta, 20)
	cases["gap"] = bytes.Replace(bad, []byte(`[30,31]`), []byte(`[31,31]`), 1)
	cases["bad entry in the second part"] = bytes.Replace(bad, []byte(`"w35":{"dtype":"U8"`), []byte(`"w35":{"dtype":"U9"`), 1)
	cases["trailing comma"] = bytes.Replace(bad, []byte(`]}}`), []byte(`]},}`), 1)
	cases["bad UTF-8 in the second part"] = bytes.Replace(bad, []byte(`"w35"`), []byte("\"w\xff5\""), 1)
	cases["not padding after it"] = append(append([]byte{}, bad...), 'x')
	cases["no comma between members"] = bytes.Replace(bad, []byte(`},"w2":`), []byte(`} "w2":`), 1)
	cases["object closed early"] = bytes.Replace(bad, []byte(`},"w30":`), []byte(`}},"w30":`), 1)
	deep := strings.Repeat("[", 70) + strings.Repeat("]", 70)
	cases["deep nesting"] = bytes.Replace(bad, []byte(`"shape":[1],"data_offsets":[35,36]`), []byte(`"shape":`+deep), 1)
	for name, hdr := range cases {
		t.Run(name, func(t *testing.T) {
			dataLen := int64(len(ns))
			if _, err := parseSerial("m.safetensors", hdr, dataLen, nil); err == nil {
				t.Fatal("the serial parse takes it")
			}
			for _, k := range []int{2, 3, 5} {
				checkSame(t, tiny(k), hdr, dataLen, 0)
			}
			for at := range hdr { // cut at every byte
				checkSame(t, cutsAt(at), hdr, dataLen, 0)
			}
			// Truncated at every byte.
			for n := range hdr {
				checkSame(t, tiny(2), hdr[:n], dataLen, 0)
				checkSame(t, tiny(3), hdr[:n], dataLen, 0)
			}
		})
	}
}

// TestSplitBudget: the parts pass the budget exactly when the serial parse
// does, charge what it charges, and otherwise leave it to report. The
// names are long enough for several batches of charges per part, and at
// used-1 each part alone stays within the budget.
func TestSplitBudget(t *testing.T) {
	hdr, dataLen := testHeader(names(200, strings.Repeat("model.layers.weight.", 25)), ",", meta, 100)
	b := formats.Limits{}.Budget(pkg, "m.safetensors", int64(len(hdr)))
	if _, err := parseSerial("m.safetensors", hdr, dataLen, b); err != nil {
		t.Fatal(err)
	}
	used := b.Used()
	for _, limit := range []int64{1, used / 2, used - 1, used, used + 1} {
		for _, k := range []int{2, 3} {
			if fast := checkSame(t, tiny(k), hdr, dataLen, limit); fast != (limit >= used) {
				t.Fatalf("limit %d of %d charged, %d parts: read in parts %v", limit, used, k, fast)
			}
		}
	}
}

// TestCutPoints: the cuts fall at top-level commas of an ordinary header,
// in order, near the k-ths of it.
func TestCutPoints(t *testing.T) {
	hdr, _ := testHeader(names(1000, "model.layers."), ",", meta, 500)
	top := map[int]bool{}
	for _, at := range topCommas(hdr) {
		top[at] = true
	}
	for k := 2; k <= 8; k++ {
		cuts := cutPoints(hdr, k)
		if len(cuts) != k-1 {
			t.Fatalf("%d parts: cuts %v", k, cuts)
		}
		for i, at := range cuts {
			if !top[at] || at < (i+1)*len(hdr)/k || at > (i+1)*len(hdr)/k+200 {
				t.Fatalf("%d parts: cut %d at %d, not a top-level comma just after %d", k, i, at, (i+1)*len(hdr)/k)
			}
		}
	}
	if cuts := cutPoints([]byte(`{"a":[1,2,3,4,5,6,7,8,9,10,11,12]}`), 2); len(cuts) != 0 {
		t.Fatalf("cuts %v in a header without an entry's end", cuts)
	}
}

// FuzzSplit: whatever the header and wherever it is cut, the parts give
// the serial parse's header, or its error.
func FuzzSplit(f *testing.F) {
	for _, b := range fuzzSeedFiles(f) {
		f.Add(headerOf(b), uint32(len(b)), uint8(0), uint64(0))
	}
	for _, b := range corpusFrames(f) {
		f.Add(headerOf(b), uint32(1<<20), uint8(1), uint64(0))
	}
	hdr, dataLen := testHeader(append(names(10, "w"), `b},"c`, `e\"`, "f\u00e9"), ",", meta, 6)
	f.Add(hdr, uint32(dataLen), uint8(2), uint64(0))
	f.Add(hdr, uint32(dataLen), uint8(3), uint64(12345))
	f.Fuzz(func(t *testing.T, hdr []byte, dataLen uint32, parts uint8, cut uint64) {
		s := tiny(2 + int(parts%4))
		if cut != 0 { // cut at commas the fuzzer picks
			var commas []int
			for i, c := range hdr {
				if c == ',' {
					commas = append(commas, i)
				}
			}
			var at []int
			for i := 0; i < int(parts%4)+1 && len(commas) > 0; i++ {
				j := int(cut % uint64(len(commas)))
				cut /= uint64(len(commas))
				if len(at) == 0 || commas[j] > at[len(at)-1] {
					at = append(at, commas[j])
				}
			}
			s = cutsAt(at...)
		}
		checkSame(t, s, hdr, int64(dataLen), 0)
	})
}

// headerOf is the header of a file or frame (as much of it as there is).
func headerOf(b []byte) []byte {
	if len(b) < lengthPrefix {
		return b
	}
	n := binary.LittleEndian.Uint64(b)
	return b[lengthPrefix : lengthPrefix+int(min(n, uint64(len(b)-lengthPrefix)))]
}

// corpusFrames are the frames of FuzzParse's corpus (the first value of
// each file).
func corpusFrames(f *testing.F) [][]byte {
	files, err := filepath.Glob("testdata/fuzz/FuzzParse/*")
	if err != nil {
		f.Fatal(err)
	}
	var out [][]byte
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		if len(lines) < 2 || !strings.HasPrefix(lines[1], "[]byte(") {
			f.Fatalf("%s: not a corpus file of FuzzParse", p)
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			f.Fatalf("%s: %v", p, err)
		}
		out = append(out, []byte(s))
	}
	if len(out) == 0 {
		f.Fatal("FuzzParse has no corpus")
	}
	return out
}
