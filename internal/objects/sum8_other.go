//go:build !amd64 || purego

package objects

const haveSum8 = false

func sum8(in *[8][1024]byte, lens *[8]uint32, blocks int, lanes *laneFlags, out *[8]Digest) {
	panic("objects: sum8 without its assembly")
}
