package zipfile

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// record is an extra field record: id, length, data.
func record(id uint16, data ...byte) []byte {
	b := binary.LittleEndian.AppendUint16(nil, id)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(data)))
	return append(b, data...)
}

func TestZip64Field(t *testing.T) {
	z64 := record(zip64ExtraID, 1, 2, 3, 4, 5, 6, 7, 8)
	others := func(n int) []byte { // n records of other ids
		var b []byte
		for i := range n {
			b = append(b, record(uint16(0x100+i), byte(i))...)
		}
		return b
	}
	for _, c := range []struct {
		name  string
		field []byte
		want  []byte // the zip64 record's data, nil for none
		err   string
	}{
		{name: "empty"},
		{name: "zip64 alone", field: z64, want: z64[4:]},
		{name: "after others", field: append(others(3), z64...), want: z64[4:]},
		{name: "past eight others", field: append(others(12), z64...), want: z64[4:]},
		{name: "torch's padding", field: record(0x4246, 'Z', 'Z')},
		{name: "twice among few", field: append(others(3), record(0x101)...), err: "appears twice"},
		// Past eight records, ids are kept in a map: a repeat there is
		// found as well, of an id seen early or late.
		{name: "twice past eight, early id", field: append(others(12), record(0x100)...), err: "appears twice"},
		{name: "twice past eight, late id", field: append(others(12), record(0x10a)...), err: "appears twice"},
		{name: "zip64 twice", field: append(append(z64, others(2)...), z64...), err: "appears twice"},
		{name: "cut header", field: append(others(1), 1, 0, 2), err: "inside a record header"},
		{name: "record passes the end", field: append(others(1), record(0x200, 1, 2, 3)[:6]...), err: "passes the end"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok, err := zip64Field(c.field)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ok != (c.want != nil) || !bytes.Equal(got, c.want) {
				t.Fatalf("zip64 record %x (found %v), want %x", got, ok, c.want)
			}
		})
	}
}

// The end record is found after a comment of any length: in the last
// bytes when there is none (the short read), else in the longest tail.
func TestEndRecordAfterAComment(t *testing.T) {
	w := &Writer{}
	w.AddBytes("a/x", []byte("hello"))
	w.AddBytes("a/y", bytes.Repeat([]byte{7}, 300))
	var archive []byte
	for _, e := range w.Finish("t.zip").Extents {
		archive = append(archive, e.Bytes...)
	}
	for _, n := range []int{0, 1, 60, 64, 65, 100, 5000, maxComment} {
		comment := bytes.Repeat([]byte{'c'}, n)
		if n >= 30 { // a record's signature inside the comment, whose length does not fit it
			copy(comment[4:], binary.LittleEndian.AppendUint32(nil, sigEnd))
		}
		b := append([]byte{}, archive...)
		binary.LittleEndian.PutUint16(b[len(b)-2:], uint16(n))
		b = append(b, comment...)
		a, err := ReadDirectory(bytes.NewReader(b), int64(len(b)), "t.zip", "test", Limits{MaxMembers: 10, MaxCentralDirectory: 1 << 20})
		if err != nil {
			t.Fatalf("comment of %d bytes: %v", n, err)
		}
		if len(a.Members) != 2 || a.Members[0].Name != "a/x" || a.Members[1].Name != "a/y" {
			t.Fatalf("comment of %d bytes: members %v", n, a.Members)
		}
	}
}
