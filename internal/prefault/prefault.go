// Package prefault maps the pages of a large fresh slice in one system
// call, before it is filled.
//
// Why: a large slice made for a parse, a manifest or a list of records is
// fresh memory, and its first touch is a fault per page. Worse, while the
// GC runs, the write barrier reads a pointer slot before writing it: the
// read maps the shared zero page, and the write then copies it, which
// flushes the TLB of every CPU the process ran on, by an interrupt (a VM
// exit on this kind of machine). In the add of 100,000 tensors the header
// parse's faults were half of its time (perf: do_wp_page,
// flush_tlb_mm_range).
package prefault

import "unsafe"

// Slice makes the pages wholly inside s's backing array (up to its
// capacity) resident and writable, changing none of their bytes. It is a
// hint: where it cannot be (another OS, a kernel before 5.14), the pages
// fault in as they are first touched.
func Slice[T any](s []T) {
	n := uintptr(cap(s)) * unsafe.Sizeof(*new(T))
	if n < Min {
		return
	}
	base := unsafe.Pointer(unsafe.SliceData(s[:cap(s)]))
	page := uintptr(pageSize)
	p := uintptr(base)
	start, end := (p+page-1)&^(page-1), (p+n)&^(page-1)
	if end <= start {
		return
	}
	populate(unsafe.Slice((*byte)(unsafe.Add(base, start-p)), end-start))
}

// Min is the least size of a slice worth the system call.
const Min = 64 << 10
