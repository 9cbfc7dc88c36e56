package transfer

import (
	"sync"

	"github.com/mstore/mstore/internal/objects"
)

// A pull reads each large blob into one of a few chunk-sized buffers that
// it takes back once the blob is written (remote.CoderInto), so that the
// same pages carry every blob. A fresh buffer per blob was faulted in,
// zeroed, freed and given back to the OS each time (perf of a pull of
// 988 MB from serve: 3-5% of the client's CPU in the zeroing alone), and
// the pull's peak was 120 MB where it is 85 MB with the pool.
//
// A sync.Pool and not a list of its own: a pull of large blobs collects
// garbage a few times at most, so the buffers stay, and one of many small
// blobs (whose batches take the memory) gets them back. Held in a list,
// they raised the peak of a pull of 100,000 small tensors by 18 MB.
var blobBuffers = sync.Pool{New: func() any {
	b := make([]byte, objects.ChunkSize)
	return &b
}}

// getBuffer returns a buffer that holds a chunk.
func getBuffer() *[]byte { return blobBuffers.Get().(*[]byte) }

// putBuffer takes b back; nothing may refer to its bytes any more.
func putBuffer(b *[]byte) { blobBuffers.Put(b) }
