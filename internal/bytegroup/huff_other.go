//go:build !amd64 || purego

package bytegroup

// Without codePair's assembly (huff_amd64.s) each stream is coded on its
// own.
func (e *huffEncoder) pair(out, a, b []byte) ([]byte, int, int) { return e.pairOneByOne(out, a, b) }
