//go:build !amd64 || purego

package bytegroup

// Without the assembly of planes_amd64.s the Go loops do every element.

func splitFast(src []byte, planes [][]byte, width int) int { return 0 }

func joinFast(dst []byte, planes [][]byte, width int) int { return 0 }

func joinEqualFast(raw []byte, planes [][]byte, width int) (int, bool) { return 0, true }

func splitSampledFast(src []byte, planes [][]byte, h *[2][256]uint32) int { return 0 }
