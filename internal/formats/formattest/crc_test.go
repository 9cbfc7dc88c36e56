package formattest

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/mstore/mstore/internal/formats"
)

// A planned frame's CRC-32 slots are filled by Materialize with the CRC of
// the tensor written before them, and CheckLayout compares the rest.
func TestCRC32Slots(t *testing.T) {
	tensor := []byte("some tensor bytes")
	l := &formats.Layout{
		Format:  "toy",
		Tensors: []formats.Tensor{{Name: "t", DType: "U8", Shape: []int64{int64(len(tensor))}, Size: int64(len(tensor))}},
		Files: []formats.File{{Path: "a.toy", Size: int64(len(tensor)) + 8, Extents: []formats.Extent{
			{Kind: formats.TensorData, Size: int64(len(tensor))},
			{Kind: formats.Frame, Offset: int64(len(tensor)), Size: 8, Bytes: []byte("CRC:____"),
				CRC32s: []formats.CRC32Slot{{At: 4, Tensor: 0}}},
		}}},
	}
	files, err := Materialize(l, [][]byte{tensor})
	if err != nil {
		t.Fatal(err)
	}
	b := files["a.toy"]
	if got, want := binary.LittleEndian.Uint32(b[len(tensor)+4:]), crc32.ChecksumIEEE(tensor); got != want {
		t.Fatalf("slot holds %#x, want the tensor's CRC %#x", got, want)
	}
	if string(b[len(tensor):len(tensor)+4]) != "CRC:" {
		t.Fatal("bytes beside the slot changed")
	}
	if err := CheckLayout(l, files); err != nil {
		t.Fatalf("CheckLayout refuses a frame whose slot is filled: %v", err)
	}
	b[len(tensor)] = 'X'
	if err := CheckLayout(l, files); err == nil {
		t.Fatal("CheckLayout accepts a frame that differs outside its slots")
	}
	l.Files[0].Extents[1].CRC32s[0].At = 6
	if _, err := Materialize(l, [][]byte{tensor}); err == nil {
		t.Fatal("Materialize accepts a slot that passes the end of its frame")
	}
}
