package transfer

import "github.com/mstore/mstore/internal/objects"

// A pull reads each large blob into one of a few chunk-sized buffers that
// it takes back once the blob is written (remote.CoderInto), so that the
// same pages carry every blob. A fresh buffer per blob was faulted in,
// zeroed, freed and given back to the OS each time: perf of a pull of
// 988 MB from serve put that, and the write from cold pages, at a fifth
// of the client's CPU.

// buffers holds the buffers taken back: a bounded channel rather than a
// sync.Pool, which garbage collection empties. A pull holds one per
// request in flight.
type buffers chan []byte

// blobBuffers serves every pull of the process, as decoding does.
var blobBuffers = make(buffers, 2*DefaultJobs)

// get returns a buffer that holds a chunk.
func (p buffers) get() []byte {
	select {
	case b := <-p:
		return b
	default:
		return make([]byte, objects.ChunkSize)
	}
}

// put takes b back; nothing may refer to it any more.
func (p buffers) put(b []byte) {
	select {
	case p <- b[:cap(b)]:
	default:
	}
}
