package safetensors

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// populate maps the pages wholly inside s's backing array writable in one
// system call (MADV_POPULATE_WRITE), which changes no byte of them.
//
// Why: a large slice made for a parse is fresh memory, and its first
// touch is a fault per page. Worse, while the GC runs, the write barrier
// reads a pointer slot before writing it: the read maps the shared zero
// page, and the write then copies it, which flushes the TLB of every CPU
// the process ran on, by an interrupt. In the add of 100,000 tensors the
// parse's faults were half of its time, and 30–40 ms of wall time went to
// filling the 8 MB of entries (perf: do_wp_page, flush_tlb_mm_range).
//
// It is a hint: a kernel before 5.14 refuses it (EINVAL), and then the
// pages fault in as before.
func populate[T any](s []T) {
	n := uintptr(cap(s)) * unsafe.Sizeof(*new(T))
	if n < populateMin {
		return
	}
	base := unsafe.Pointer(unsafe.SliceData(s[:cap(s)]))
	page := uintptr(os.Getpagesize())
	p := uintptr(base)
	start, end := (p+page-1)&^(page-1), (p+n)&^(page-1)
	if end <= start {
		return
	}
	_ = unix.Madvise(unsafe.Slice((*byte)(unsafe.Add(base, start-p)), end-start), unix.MADV_POPULATE_WRITE)
}

// populateMin is the least size of a slice worth the system call.
const populateMin = 64 << 10
