package objects

// ChunkSize is the largest blob a run of tensor or frame data is cut into.
// It is part of the store format: changing it changes every chunk digest.
const ChunkSize = 4 << 20

// ChunkCount is the number of chunks a run of size bytes is cut into.
func ChunkCount(size int64) int {
	if size <= 0 {
		return 0
	}
	return int((size + ChunkSize - 1) / ChunkSize)
}

// ChunkBounds returns the offset and length of chunk i of a run of size bytes.
func ChunkBounds(size int64, i int) (off, n int64) {
	off = int64(i) * ChunkSize
	n = min(size-off, ChunkSize)
	return off, n
}
