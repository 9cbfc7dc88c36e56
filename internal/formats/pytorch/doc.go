// Package pytorch is the codec for PyTorch checkpoints written by
// torch.save (.bin, .pt, .pth; sharded with PREFIX.bin.index.json). It
// reads them without ever running their code: the zip archive is parsed
// here, and data.pkl is interpreted by a restricted unpickler that knows
// only the opcodes and globals torch.load(weights_only=True) allows, and
// builds plain Go values from them. Nothing is imported, called or
// evaluated.
//
// # File layout
//
// A checkpoint is a zip archive of stored (uncompressed) members, all in
// one top-level folder named after the file ("archive/", "model/"), each
// member's data aligned to 64 bytes by padding in its local header:
//
//	offset 0
//	┌──────────────────────────────────────────────┐ ┐
//	│ local header  archive/data.pkl  [FB padding]  │ │
//	│ data.pkl: pickle (protocol 2) of the object   │ │
//	│ data descriptor (CRC-32, sizes)               │ │
//	│ archive/.format_version, .storage_alignment,  │ │ Frame
//	│ archive/byteorder: "1", "64", "little"        │ │
//	│ local header  archive/data/0  [FB padding]    │ │
//	├──────────────────────────────────────────────┤ ┘
//	│ storage data/0 (raw little-endian elements)   │   TensorData
//	├──────────────────────────────────────────────┤ ┐
//	│ data descriptor; local header archive/data/1  │ │ Frame
//	├──────────────────────────────────────────────┤ ┘
//	│ storage data/1                                │   TensorData
//	├──────────────────────────────────────────────┤ ┐
//	│ …  archive/version ("3\n"),                   │ │
//	│ archive/.data/serialization_id                │ │
//	│ central directory (one entry per member)      │ │ Frame
//	│ zip64 end record, zip64 locator               │ │
//	│ end of central directory record               │ │
//	└──────────────────────────────────────────────┘ ┘ end of file
//
// data.pkl rebuilds the saved object: usually an OrderedDict from names to
// tensors, each made by torch._utils._rebuild_tensor_v2(storage, offset,
// size, stride, requires_grad, backward_hooks), where storage is the
// persistent id ('storage', torch.FloatStorage, "0", "cpu", numel) that
// names member data/0. The storages are what the file holds; tensors are
// views of them.
//
// # Storages and tensors
//
// Each storage's data is one TensorData extent; everything else (headers,
// data.pkl, the small records, the central directory) is frame. The state-
// dict tensors, named by their path in the object tree joined with "."
// ("model.layers.0.weight", list indexes as numbers), map to Layout
// tensors so:
//
//   - a storage that is exactly one tensor (same dtype, offset 0,
//     contiguous, all of its bytes: the common case) is that tensor, with
//     its name, dtype and shape, so that its bytes and digest are those of
//     the same tensor in a SafeTensors file;
//   - any other storage (shared by several partial views, or holding one
//     strided tensor) is a bare storage "<storage:FILE/data/KEY>", of its
//     own dtype and element count;
//   - state-dict tensors that are not their storage's Layout tensor (views,
//     a second name of a shared tensor) are kept in File.Meta[MetaKey] as
//     canonical JSON (FileMeta: name, storage, dtype, shape, stride, offset
//     and position), with the bare storages' names and a count of the
//     values that are not tensors. A checkout into another format reads
//     views out of their storage (View.Gather).
//
// Layout tensors follow the state-dict order. A state_dict's _metadata
// attribute (module versions) and tensor attributes are checked, not kept.
//
// # What is refused
//
//   - invalid_archive: not a zip, truncated, end records that disagree, a
//     local header or data descriptor that disagrees with the central
//     directory, bytes that belong to no member, overlaps, CRC-32
//     mismatches (a storage's, from a Dir that defers them, by the caller:
//     the parse lists the storages in File.CRC32Checks unread, and an add
//     compares them on the bytes it stores), a malformed extra field;
//     pickle structure: an unknown
//     opcode byte, stack underflow, a memo entry read before it is
//     written, no STOP, bytes after STOP;
//   - path_traversal: a member name, storage key or weight_map file that
//     is not a clean relative path (formats.IsMemberPath);
//   - schema_error: duplicate members, members outside the one folder, no
//     data.pkl or version; any global not on the allowlist (named in the
//     message: os.system, builtins.eval, …); allowed opcodes that torch's
//     safe loader refuses (INST, OBJ, STACK_GLOBAL, EXT*, PERSID, …);
//     persistent ids other than storages; storage sizes that disagree with
//     data/N; tensors that read past their storage; backward hooks;
//     cycles; repeated names; an index that disagrees with its shards;
//   - unsupported_version: legacy (pre-1.6) bare-pickle and tar
//     checkpoints, TorchScript archives (a code/ folder: torch.jit.save),
//     compressed or encrypted members, multi-volume zips, big-endian
//     storages, pickle protocols above 5, quantized, sparse, meta, nested
//     and subclass tensors and the dtypes mstore cannot hold;
//   - size_limit_exceeded: the bounds of Limits (members, central
//     directory, data.pkl size, memo, stack, nesting depth, values
//     visited), dimensions, and tensors that repeat a small storage into
//     more than 1 GiB.
//
// # Sharded checkpoints
//
// PREFIX-0000K-of-0000N.bin files with PREFIX.bin.index.json are one model;
// the index is checked as SafeTensors' is (every K present, the weight_map
// places exactly the state-dict tensors of each shard), and total_size,
// when present, must be one of the sums writers use: all tensors' bytes,
// each storage once, or each storage's first tensor once.
//
// # Planning
//
// Plan writes checkpoints that torch.load(weights_only=True) reads: each
// tensor in its own storage, with only the opcodes and globals above.
package pytorch
