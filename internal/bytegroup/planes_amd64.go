//go:build !purego

package bytegroup

// The SSE2 split and join (planes_amd64.s): 16 elements a step, four to
// ten times the pure Go loops, which cost a repack and a checkout of coded
// blobs a tenth to a fifth of their CPU. Each returns the elements it did
// (a multiple of 16); the Go loops do the rest.

//go:noescape
func split2(src, p0, p1 *byte, n int)

//go:noescape
func join2(dst, p0, p1 *byte, n int)

//go:noescape
func equal2(raw, p0, p1 *byte, n int) bool

//go:noescape
func equal4(raw, p0, p1, p2, p3 *byte, n int) bool

//go:noescape
func split2s(src, p0, p1 *byte, n int, h *[2][256]uint32)

//go:noescape
func split4(src, p0, p1, p2, p3 *byte, n int)

//go:noescape
func join4(dst, p0, p1, p2, p3 *byte, n int)

func splitFast(src []byte, planes [][]byte, width int) int {
	n := fastLen(src, planes, width)
	switch {
	case n == 0:
	case width == 2:
		split2(&src[0], &planes[0][0], &planes[1][0], n)
	case width == 4:
		split4(&src[0], &planes[0][0], &planes[1][0], &planes[2][0], &planes[3][0], n)
	}
	return n
}

func joinFast(dst []byte, planes [][]byte, width int) int {
	n := fastLen(dst, planes, width)
	switch {
	case n == 0:
	case width == 2:
		join2(&dst[0], &planes[0][0], &planes[1][0], n)
	case width == 4:
		join4(&dst[0], &planes[0][0], &planes[1][0], &planes[2][0], &planes[3][0], n)
	}
	return n
}

// joinEqualFast compares the first elements of the planes, joined, with
// raw's, and returns how many it compared and whether they are equal.
func joinEqualFast(raw []byte, planes [][]byte, width int) (int, bool) {
	n := fastLen(raw, planes, width)
	switch {
	case n == 0:
		return 0, true
	case width == 2:
		return n, equal2(&raw[0], &planes[0][0], &planes[1][0], n)
	}
	return n, equal4(&raw[0], &planes[0][0], &planes[1][0], &planes[2][0], &planes[3][0], n)
}

// fastLen is the elements the assembly may do: a multiple of 16 that
// every slice holds (0 for another width).
func fastLen(elems []byte, planes [][]byte, width int) int {
	if (width != 2 && width != 4) || len(planes) != width {
		return 0
	}
	n := len(elems) / width
	for _, p := range planes {
		n = min(n, len(p))
	}
	return n &^ 15
}

// splitSampledFast is split2 of the first elements (a multiple of 16)
// that also counts the first of every 16 into h (splitSampled), and
// returns how many it did.
func splitSampledFast(src []byte, planes [][]byte, h *[2][256]uint32) int {
	n := fastLen(src, planes, 2)
	if n > 0 {
		split2s(&src[0], &planes[0][0], &planes[1][0], n, h)
	}
	return n
}
