package cast

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

func TestHalfFormatsRoundTripEveryValue(t *testing.T) {
	for _, name := range []string{"F16", "BF16"} {
		f := floatFormats[name]
		var b [2]byte
		for h := range 1 << 16 {
			binary.LittleEndian.PutUint16(b[:], uint16(h))
			x := decodeFloat(b[:], f)
			bits, over := encodeFloat(x, f)
			if math.IsNaN(x) {
				if !math.IsNaN(decodeFloat(binary.LittleEndian.AppendUint16(nil, uint16(bits)), f)) {
					t.Fatalf("%s %#04x: NaN came back as %#04x", name, h, bits)
				}
				continue
			}
			if over || bits != uint64(h) {
				t.Fatalf("%s %#04x (%g) came back as %#04x (overflow %v)", name, h, x, bits, over)
			}
		}
	}
}

func TestF32ToBF16MatchesTheReferenceRounding(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		u := r.Uint32()
		x := math.Float32frombits(u)
		if math.IsNaN(float64(x)) {
			continue
		}
		want := (u + 0x7fff + (u>>16)&1) >> 16 // genmodels.py's to_bf16
		got, over := encodeFloat(float64(x), floatFormats["BF16"])
		if want&0x7f80 == 0x7f80 && !math.IsInf(float64(x), 0) {
			if !over {
				t.Fatalf("%g: no overflow reported", x)
			}
			continue
		}
		if uint32(got) != want {
			t.Fatalf("%#08x (%g): %#04x, want %#04x", u, x, got, want)
		}
	}
}

func TestF16Rounding(t *testing.T) {
	f := floatFormats["F16"]
	for _, c := range []struct {
		x    float64
		want uint64
		over bool
	}{
		{1, 0x3c00, false}, {-2, 0xc000, false}, {65504, 0x7bff, false}, {65519.99, 0x7bff, false},
		{65520, 0x7c00, true}, {-1e6, 0xfc00, true}, {math.Inf(1), 0x7c00, false},
		{math.Ldexp(1, -24), 0x0001, false}, {math.Ldexp(1, -25), 0, false}, {math.Ldexp(3, -26), 0x0001, false},
		{math.Ldexp(1, -14), 0x0400, false}, {math.Ldexp(1023, -24), 0x03ff, false}, {math.Ldexp(2047, -25), 0x0400, false},
		{1 + math.Ldexp(1, -11), 0x3c00, false}, {1 + math.Ldexp(3, -11), 0x3c02, false}, {math.Copysign(0, -1), 0x8000, false},
	} {
		got, over := encodeFloat(c.x, f)
		if got != c.want || over != c.over {
			t.Errorf("%g: %#04x overflow %v, want %#04x %v", c.x, got, over, c.want, c.over)
		}
	}
}

func TestCastRefusesOverflowUnlessClamped(t *testing.T) {
	src := binary.LittleEndian.AppendUint16(nil, 0x4780) // BF16 65536
	src = binary.LittleEndian.AppendUint16(src, 0x3f80)  // 1
	tensors := []objects.Tensor{{Name: "w", DType: "BF16", Shape: []int64{2}, Size: 4}, {Name: "ids", DType: "I32", Shape: []int64{1}, Size: 4}}
	out, tr, err := Tensors(tensors, formats.WriteOptions{DType: "f16"})
	if err != nil || out[0].DType != "F16" || out[0].Size != 4 || tr[0] == nil || tr[1] != nil || out[1].DType != "I32" {
		t.Fatalf("cast plan %+v %v %v", out, tr, err)
	}
	if _, err := tr[0](src); errs.ClassOf(err) != errs.LossyConversion {
		t.Fatalf("err = %v, want lossy_conversion", err)
	}
	_, tr, _ = Tensors(tensors, formats.WriteOptions{DType: "F16", Clamp: true})
	got, err := tr[0](src)
	if err != nil || binary.LittleEndian.Uint16(got) != 0x7bff || binary.LittleEndian.Uint16(got[2:]) != 0x3c00 {
		t.Fatalf("clamped: %x %v", got, err)
	}
	if _, _, err := Tensors(tensors, formats.WriteOptions{DType: "int4"}); errs.ClassOf(err) != errs.SchemaError {
		t.Fatalf("err = %v, want schema_error", err)
	}
	if out, tr, _ := Tensors(tensors, formats.WriteOptions{DType: "bf16"}); tr != nil || out[0].DType != "BF16" {
		t.Fatalf("a cast to the same dtype transforms: %+v", out)
	}
}
