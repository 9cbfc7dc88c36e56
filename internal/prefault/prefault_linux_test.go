package prefault

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident reports, per page of b (page-aligned), whether it is in memory.
func resident(t *testing.T, b []byte) []bool {
	t.Helper()
	page := os.Getpagesize()
	vec := make([]byte, (len(b)+page-1)/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); e != 0 {
		t.Fatal(e)
	}
	out := make([]bool, len(vec))
	for i, v := range vec {
		out[i] = v&1 != 0
	}
	return out
}

// TestSlice: Slice makes exactly the pages wholly inside a slice
// resident, and changes none of its bytes.
func TestSlice(t *testing.T) {
	page := os.Getpagesize()
	m, err := unix.Mmap(-1, 0, 64*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	m[20*page+7] = 42 // page 20 resident, with a byte to keep
	for i, in := range resident(t, m) {
		if in != (i == 20) {
			t.Fatalf("page %d resident %v before Slice", i, in)
		}
	}
	Slice(m[page+100 : 40*page-1 : 40*page-1]) // pages 2..38 are wholly inside
	for i, in := range resident(t, m) {
		if want := i >= 2 && i <= 38 || i == 20; in != want {
			t.Fatalf("page %d resident %v after Slice, want %v", i, in, want)
		}
	}
	Slice(m[50*page : 50*page+Min/2 : 50*page+Min/2]) // below Min: nothing
	if resident(t, m)[50] {
		t.Fatal("Slice took a slice under Min")
	}
	// Read last: a read maps the zero page, which mincore counts.
	for i, c := range m {
		if c != 0 && i != 20*page+7 || i == 20*page+7 && c != 42 {
			t.Fatalf("byte %d is %d after Slice", i, c)
		}
	}
	type entry struct{ a, b string }
	Slice([]entry(nil))
	Slice(make([]entry, 3, 1<<20)[:0])
}
