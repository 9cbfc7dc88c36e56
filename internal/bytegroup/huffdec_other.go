//go:build !amd64 || purego

package bytegroup

// Without decode4's assembly (huffdec_amd64.s) the four streams are
// decoded in Go.
func (d *huffDecoder) fast4(dst []byte, st *[4]huffStream, o, end *[4]int) {
	d.fast4Go(dst, st, o, end)
}

func (d *huffDecoder) fill(i, step int) { d.fillGo(i, step) }
