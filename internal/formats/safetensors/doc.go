// Package safetensors is the codec for Hugging Face SafeTensors files,
// single or sharded with a PREFIX.safetensors.index.json.
//
// # File layout
//
//	offset 0          8                          8+N                        size
//	       ┌──────────┬──────────────────────────┬──────────┬─────┬─────────┐
//	       │ N (u64le)│ header: UTF-8 JSON object │ tensor A │ ... │ tensor Z│
//	       │          │ padded with ' ' (0x20)    │          │     │         │
//	       └──────────┴──────────────────────────┴──────────┴─────┴─────────┘
//	       └───────────── Frame extent ──────────┘└── TensorData extents ──┘
//	                                              data section: data_offsets
//	                                              are relative to 8+N
//
// The header maps each tensor name to
//
//	{"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
//
// (keys in any order, no others) and may hold "__metadata__": a string to
// string object, or null. Tensors sorted by begin must tile the data section
// exactly: the first begins at 0, each begins where the previous ends, the
// last ends at the end of the file; end-begin is the size the dtype and
// shape give (sub-byte dtypes F4, F6_E2M3, F6_E3M2 must fill whole bytes).
//
// A sharded model is PREFIX-0000K-of-0000N.safetensors files, each a
// complete file as above, plus
//
//	PREFIX.safetensors.index.json:
//	{"metadata": {"total_size": <sum of tensor bytes>}, "weight_map": {"<tensor>": "<shard file>", ...}}
//
// whose weight_map must place exactly the tensors of every shard.
//
// # Parsing
//
// Parse follows the reference reader (huggingface/safetensors,
// safetensors/src/tensor.rs) and is stricter where that reader is lenient
// through serde: duplicate keys, unknown keys and lone UTF-16 surrogates are
// refused. Only headers and indexes are read; lengths are checked against
// the file size and MaxHeaderSize before anything is allocated. Error
// classes:
//
//   - invalid_archive: shorter than 8 bytes, header length past the end of
//     the file, data_offsets past the data section or ending before they
//     begin, holes, overlaps, bytes after the last tensor (all truncations
//     land here);
//   - size_limit_exceeded: header over MaxHeaderSize, index over
//     MaxIndexSize, JSON nested deeper than 64 levels;
//   - schema_error: not UTF-8, not JSON, not an object, duplicate or
//     unknown keys, bad __metadata__, a shape or size that cannot exist
//     (negative, non-integer, overflowing int64 — overflow is a description
//     of an impossible tensor, not a limit we chose), size mismatch,
//     tensor names repeated across files, and every disagreement between an
//     index and its shards, or shards without their index;
//   - unsupported_version: a dtype this build does not know;
//   - path_traversal: a weight_map file name that is not a clean relative
//     path inside the model directory.
//
// # Planning
//
// Plan writes the reverse: canonical headers for tensors in a given order,
// optionally split into shards with a regenerated index (see Plan).
package safetensors
