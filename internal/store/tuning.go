package store

// indexMmapSize is the address space bbolt maps for index.db from the
// start (not memory: pages are read only when touched). bbolt grows its
// mapping by doubling, and every remap inside a write transaction copies
// every node the transaction touched out of the old mapping: an add that
// records 100,000 small blobs remapped a dozen times and spent a third of
// its commit copying. Below this size the index is never remapped. It is
// 256 MiB, not more: the mapping counts against an address-space limit
// (ulimit -v, prlimit --as), and an index of 100,000 blobs is ~10 MB.
const indexMmapSize = 256 << 20
