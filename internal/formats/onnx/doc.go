// Package onnx is the codec for ONNX models: .onnx files (protobuf
// ModelProto) with their tensors inside, or in external data files.
//
// # File layout
//
// A .onnx file is one protobuf message. The codec reads it with protowire,
// field by field, and cuts it where tensor bytes are:
//
//	model.onnx
//	┌───────────────────────────────────────────────────────────────────────┐
//	│ ModelProto: ir_version(1) opset_import(8) … graph(7) functions(25) …   │
//	│   GraphProto: node(1)… initializer(5)… sparse_initializer(15)…         │
//	│     NodeProto: … attribute(5): t(5) / tensors(10) / g(6) / graphs(11)  │
//	│       (If/Loop/Scan bodies: GraphProtos again, at any depth)           │
//	│     TensorProto: dims(1) data_type(2) name(8) raw_data(9) …            │
//	│                                        ┌───────────────────┐           │
//	│  … tag 0x4a, varint length ─────────── │ tensor bytes      │ … next    │
//	│                                        └───────────────────┘   field   │
//	└───────────────────────────────────────────────────────────────────────┘
//	 └── Frame ──────────────────────────────┘└── TensorData ──┘└─ Frame ─┘
//
//	model.onnx.data (named by external_data location, offset, length)
//	┌────────────────┬──────────────┬─────────┬──────────────┬──────────┐
//	│ stale / padding│ tensor A     │ padding │ tensor B     │ trailing │
//	└────────────────┴──────────────┴─────────┴──────────────┴──────────┘
//	 └── Frame ──────┘└ TensorData ┘└ Frame ──┘└ TensorData ┘└ Frame ───┘
//
// A TensorProto's bytes are a tensor extent when they are exactly the
// tensor's little-endian bytes: raw_data; packed float_data (FLOAT,
// COMPLEX64) and packed double_data (DOUBLE, COMPLEX128), the only
// fixed-width data fields; or a range of an external data file. Data in
// int32_data, int64_data and uint64_data (varints, not the tensor's bytes),
// string_data, or unpacked floats stays in the frame, and the .onnx file's
// Meta counts those tensors (MetaFrameTensors): a conversion to another
// container would lose them and is refused unless --tensors chooses what to
// convert. Everything else (the graph, names, attributes, the protobuf
// tags and lengths, external data entries) is frame, so the files come
// back byte for byte, stale bytes of data files included.
//
// # Tensors and their names
//
// Tensors are the TensorProtos found, in file order, in the main graph,
// in subgraphs (node attributes of type GRAPH/GRAPHS, at any depth), in
// functions and in training_info graphs: initializers, sparse initializers
// (two tensors, NAME.values and NAME.indices), and tensor attributes
// (Constant's value is named by the node's output; other attributes
// LABEL.ATTR, or LABEL.ATTR[i] in a list, LABEL being the node's name, else
// its first output, else its op_type). Names must be unique in a layout: a
// tensor whose name an earlier one took (another subgraph, another .onnx
// file of the folder) is qualified by its file and graph path, as in
// "model.onnx:If_0.then_branch/Loop_3.body/w" (functions:
// "function:DOMAIN::NAME", training graphs: "training_info[K]/algorithm");
// if even that is taken, "~2", "~3", … is appended. DTypes are SafeTensors'
// names where SafeTensors has the type (FLOAT → F32, FLOAT16 → F16,
// BFLOAT16 → BF16, INT64 → I64, FLOAT8E4M3FN → F8_E4M3, FLOAT4E2M1 → F4, …),
// else the ONNX name (FLOAT8E4M3FNUZ, UINT4, INT4, COMPLEX128, …); 4- and
// 2-bit types are packed and rounded up to whole bytes, as ONNX stores them.
//
// # External data
//
// A TensorProto with data_location EXTERNAL names its bytes with
// external_data entries: location (required), offset (default 0), length
// (default: the size dims and data_type give; if given it must be that
// size) and checksum (kept, not checked). A location is relative to the
// .onnx file's folder and must stay inside the model directory
// (formats.IsMemberPath): absolute paths, ".." anywhere, drive letters,
// backslashes and look-alike slashes or dots are path_traversal, and so
// are symbolic links (refused by the Dir) and data files with more than
// one hard link (formats.LinkCounter). Unknown or repeated keys and
// numbers that are not plain decimal digits are schema_error. A data file
// that is missing, or shorter than offset+length, is invalid_archive — a
// reader must never see zeros where weights should be. Tensors of data
// files may not overlap (invalid_archive); the bytes around them are
// frame. Data files are part of the layout (and so of the model) even
// though Claims does not claim them.
//
// # Bounds and error classes
//
//   - invalid_archive: bad tags or varints, lengths that run past their
//     message or the file (every truncation), groups, missing or short
//     data files, overlapping external ranges;
//   - schema_error: no ir_version, graph or opset_import; fields with the
//     wrong wire type; a tensor's bytes that are not what dims × data_type
//     need (raw_data too short or too long); data in two fields; external
//     data entries as above; initializers without names; names that are
//     not UTF-8; negative or overflowing dims;
//   - unsupported_version: ir_version above MaxIRVersion, an opset of a
//     standard domain above MaxOpsets, a data_type above 26, segments;
//   - size_limit_exceeded: messages nested deeper than MaxDepth (100),
//     .onnx files past 2 GiB, more than MaxTensors tensors or MaxDims dims,
//     names or entries past 1 MiB;
//   - path_traversal: external data locations as above.
//
// Lengths are checked against their message before anything is read;
// tensor data is never read, and the file is walked through a 64 KiB
// window, so memory does not grow with the model.
//
// # Planning
//
// Plan writes the model again without I/O, from the parsed (or stored)
// frames: the protobuf is copied except for the TensorProtos that hold
// tensor extents and the messages around them, whose lengths change. With
// PlanOptions.ExternalData every initializer of at least SizeThreshold
// bytes (default 1024, as onnx) goes to that one data file beside each
// .onnx, aligned to Alignment, or by default to 4096 when it is 1 MiB or
// more (ONNX Runtime's rule) and packed otherwise (onnx's); the other
// tensors go inside as raw_data. Constant values, sparse and training
// tensors stay inside, as onnx's own conversion leaves them. Without
// ExternalData every tensor goes inside, refused past 2 GiB.
package onnx
