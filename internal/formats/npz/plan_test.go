package npz_test

import (
	"encoding/binary"
	"math"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/npz"
)

// planned writes an .npz of an I32 [2,3] array named name and an F64 [2]
// array x/y.
func planned(name string) (map[string][]byte, error) {
	var a, b []byte
	for i := range 6 {
		a = binary.LittleEndian.AppendUint32(a, uint32(i))
	}
	for _, f := range []float64{1, 2} {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
	}
	l, err := npz.Plan([]formats.Tensor{{Name: name, DType: "I32", Shape: []int64{2, 3}, Size: 24}, {Name: "x/y", DType: "F64", Shape: []int64{2}, Size: 16}}, "model")
	if err != nil {
		return nil, err
	}
	return formattest.Materialize(l, [][]byte{a, b})
}
