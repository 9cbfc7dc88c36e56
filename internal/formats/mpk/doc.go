// Package mpk is the codec for MPK model archives: gzip-compressed tar
// streams that hold an MPK inference contract, a pipeline description and
// model binaries, taken in under the MPK archive contract
// (../shared/MPK_CONTRACT.md beside the repository).
//
// # Archive layout
//
//	model.tar.gz (only this lowercase ending is accepted)
//	└─ gzip ─────────────────────────────────────────────────────────────┐
//	   tar stream                                                         │
//	   ┌────────┬─────────┬─────┬────────┬─────────┬─────┬──────────────┐ │
//	   │ header │ content │ pad │ header │ content │ pad │ 2 zero blocks│ │
//	   │ (+PAX) │ member 0│     │        │ member 1│     │ (+ zeros)    │ │
//	   └────────┴─────────┴─────┴────────┴─────────┴─────┴──────────────┘ │
//	   └ Frame ─┘└TensorData┘└─ Frame ───┘└TensorData┘└Frame┘└── Zeros ───┘
//
// Regular files are extracted by class to CLASSDIR/BASENAME: *.json to
// etc/, *.so to lib/, *.elf to share/. Directory entries are checked and
// ignored. An archive must hold the contract (mpk.json or *_mpk.json), the
// loader-side pipeline_sequence.json and at least one *.elf or *.so.
//
// # Loading
//
// Load reads the archive in one pass and stops at the first failure,
// which has exactly one class:
//
//   - invalid_archive: a name not ending in lowercase .tar.gz (.mpk, .tgz,
//     .tar, .gz, .TAR.GZ: refused before reading); not gzip, a corrupt or
//     truncated gzip stream; a bad tar header or checksum, a truncated tar
//     stream, a missing end-of-archive marker, non-zero bytes after it;
//     devices, FIFOs, sparse files, global PAX headers and any other entry
//     type but regular files and directories; a directory with content;
//     two entries extracted to the same path (compared after Unicode NFC
//     and lower-casing, as macOS and Windows compare names);
//   - path_traversal: entry names that are absolute, hold "..", a drive
//     or stream colon, a backslash, invalid UTF-8, Unicode look-alikes of
//     slashes (U+FF0F, U+2215, U+FF3C, …) or dot segments made of
//     look-alike dots (U+FF0E, U+2024, U+FE52, …) — formats.IsMemberPath,
//     checked on the name after PAX and GNU long-name headers apply, with
//     leading "./" dropped; symbolic and hard links;
//   - schema_error: a regular file of no class; missing required
//     contents; JSON that is not UTF-8, does not parse, holds two values or
//     a duplicate key at any level; a contract whose "version" is missing
//     or not a string; every pipeline_sequence.json rule (see below);
//   - unsupported_version: a contract version outside SupportedVersions;
//   - size_limit_exceeded: the limits below, and JSON nested deeper than
//     max_json_depth.
//
// Limits (add's flags, which the codec declares: LimitFlags; a flag not
// given takes the default):
//
//	max_archive_bytes  16 GiB  the archive file, and the tar stream it decompresses to
//	max_entries        10000   tar entries, directories included
//	max_entry_bytes     8 GiB  one entry's declared size, checked at its header
//	max_json_depth        64   nested arrays and objects in any JSON member (at most 10000)
//
// and JSON members are validated in memory, so one larger than
// MaxJSONBytes (64 MiB) is refused too. Every limit is enforced while
// streaming: a header that declares too much is refused before its content
// is read, and the decompressed bytes are counted as they come out of the
// gzip reader, so a gzip bomb stops at max_archive_bytes having used a few
// fixed buffers.
//
// pipeline_sequence.json is an object with a non-empty "pipelines" array
// whose first element is an object with a non-empty "sequence" array of
// stages; each stage has an integer "sequence_id" (a JSON integer literal),
// non-empty strings "name", "pluginId", "configPath", "processor" and
// "kernel" (one of SupportedKernels, matched exactly); names are unique;
// the optional "input" is a string or an array of strings, each "decoder"
// or the name of a stage before it in the stable order: ascending
// sequence_id, then position in the file. That order is the one Stages
// and `mstore show` give.
//
// Extracting is checkout --extract's: the restorer writes each member, as
// stored and checked at add, at its Target (through os.Root, created
// exclusively, mode 0644) in a temp directory it publishes only whole, so
// there is one extraction path, the one users run.
//
// # In the store
//
// Parse lays the archive out as its decompressed tar stream: tar headers
// and padding are frames, each member's content is a tensor (U8, named by
// its path in the archive), so a binary two archives share is stored once.
// The File carries Meta[formats.MetaCompression] = "gzip-canonical", and
// the archive as it was added (size, BLAKE3, SHA-256), the contracts and
// the stages. Checkout writes the tar stream back byte for byte and
// compresses it with NewCanonicalWriter: the same stored archive gives the
// same .tar.gz on every machine (for a given Go release). An archive that
// was compressed differently when it was added therefore checks out to
// other .tar.gz bytes around the identical tar stream; adding that
// checkout again gives the same tensors and frames, and only the
// recorded archive size and digests differ.
//
// # Fixtures
//
// testdata/fixtures holds one archive per rule, valid and hostile, and
// testdata/fixtures_manifest.json lists each with its expected outcome
// and SHA-256. fixtures_list_test.go generates them bit for bit (gzip with
// stored deflate blocks, so no compressor version can change them); the
// tests regenerate them and fail on any difference from the manifest.
package mpk

//go:generate go test -run TestFixturesAreReproducible -update .
