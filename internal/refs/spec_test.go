package refs

import (
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
)

func TestParseSpec(t *testing.T) {
	full := strings.Repeat("0123456789abcdef", 4)
	for _, tc := range []struct {
		in   string
		want Spec
		out  string // canonical form, if not in
	}{
		{in: "qwen2.5-0.5b", want: Spec{Kind: KindRef, Name: "qwen2.5-0.5b"}},
		{in: "Qwen/Qwen2.5-0.5B", want: Spec{Kind: KindRef, Name: "Qwen/Qwen2.5-0.5B"}},
		{in: "deadbee", want: Spec{Kind: KindRef, Name: "deadbee"}}, // 7 digits: only a name
		{in: "DEADBEEF", want: Spec{Kind: KindRef, Name: "DEADBEEF"}},
		{in: "acme/llama-ft:v1", want: Spec{Kind: KindTag, Name: "acme/llama-ft", Tag: "v1"}},
		{in: "a:_x.y-z", want: Spec{Kind: KindTag, Name: "a", Tag: "_x.y-z"}},
		{in: "acme/llama-ft@deadbeef", want: Spec{Kind: KindPinned, Name: "acme/llama-ft", Digest: "deadbeef"}},
		{in: "m@" + full, want: Spec{Kind: KindPinned, Name: "m", Digest: full}},
		{in: "deadbeef", want: Spec{Kind: KindDigest, Name: "deadbeef", Digest: "deadbeef"}},
		{in: full, want: Spec{Kind: KindDigest, Name: full, Digest: full}},
		{in: full + "a", want: Spec{Kind: KindRef, Name: full + "a"}}, // too long for a digest
		{in: "m~0", want: Spec{Kind: KindBack, Name: "m"}},
		{in: "m~3", want: Spec{Kind: KindBack, Name: "m", Back: 3}},
		{in: "acme/m~12", want: Spec{Kind: KindBack, Name: "acme/m", Back: 12}},
		{in: "m~", want: Spec{Kind: KindBack, Name: "m", Back: 1}, out: "m~1"},
		{in: "m~007", want: Spec{Kind: KindBack, Name: "m", Back: 7}, out: "m~7"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSpec(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			out := tc.out
			if out == "" {
				out = tc.in
			}
			if got.String() != out {
				t.Fatalf("String() = %q, want %q", got.String(), out)
			}
			if again, err := ParseSpec(got.String()); err != nil || again != got {
				t.Fatalf("round trip: %+v, %v", again, err)
			}
		})
	}
}

func TestParseSpecRefuses(t *testing.T) {
	for _, tc := range []struct{ in, why string }{
		{"", "empty"},
		{":v1", `name ""`},
		{"@deadbeef", `name ""`},
		{"~1", `name ""`},
		{"a/../b", "must start"},
		{"m:", "empty tag"},
		{"m:.v", "must start"},
		{"m:v:w", `":"`},
		{"m:v@deadbeef", `"@"`},
		{"m@", "8 to 64 lowercase hex"},
		{"m@deadbee", "8 to 64 lowercase hex"},
		{"m@DEADBEEF", "8 to 64 lowercase hex"},
		{"m@deadbeefx", "8 to 64 lowercase hex"},
		{"m@" + strings.Repeat("a", 65), "8 to 64 lowercase hex"},
		{"m@deadbeef~1", "8 to 64 lowercase hex"},
		{"m~-1", "number of moves"},
		{"m~+1", "number of moves"},
		{"m~1~1", "number of moves"},
		{"m~x", "number of moves"},
		{"m~99999999999999999999", "too large"},
		{"a b", `" "`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			_, err := ParseSpec(tc.in)
			wantClass(t, err, errs.SchemaError, tc.why, "version name")
		})
	}
}

func TestSpecStringOfZeroSpec(t *testing.T) {
	if got := (Spec{}).String(); !strings.Contains(got, "invalid") {
		t.Fatalf("zero Spec prints %q", got)
	}
}
