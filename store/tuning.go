package store

// indexMmapSize is the address space bbolt maps for index.db from the
// start (not memory: pages are read only when touched). bbolt grows its
// mapping by doubling, and every remap inside a write transaction copies
// every node the transaction touched out of the old mapping: an add that
// records 100,000 small blobs remapped a dozen times and spent a third of
// its commit copying. Below this size the index is never remapped.
const indexMmapSize = 1 << 30
