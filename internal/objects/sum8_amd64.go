//go:build !purego

package objects

import "golang.org/x/sys/cpu"

//go:generate sh -c "go run gen_sum8.go > sum8_amd64.s"

// haveSum8: sum8_amd64.s needs AVX2 (and the OS saving its registers,
// which cpu checks).
var haveSum8 = cpu.X86.HasAVX2

//go:noescape
func sum8(in *[8][1024]byte, lens *[8]uint32, blocks int, lanes *laneFlags, out *[8]Digest)
