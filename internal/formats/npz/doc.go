// Package npz is the codec of NumPy's own files: .npy (one array: a magic
// string, a version, a Python-literal header naming the dtype, the order
// and the shape, then the data) and .npz (a zip of .npy files, which
// numpy.savez writes and MLX and JAX users keep weights in).
//
// Layout: a .npy file is a frame (its preamble and header) and one tensor;
// a stored .npz file is, member by member, a frame (the zip local header and
// the .npy header), a tensor, and frames for data descriptors and the
// central directory, read in one pass with the shared zip reader
// (formats/zipfile.Scan). A deflated .npz (np.savez_compressed) is laid out
// as its decoded stream (deflate.go), checked out deflated again
// canonically. Headers
// v1, v2 and v3, every fixed-size dtype numpy writes (either byte order:
// the dtypes mstore names, F32, I64, …, are little-endian; others keep
// numpy's descr, "npy:>f4", "npy:<U8", "npy:<M8[ns]"), C or Fortran order.
// Object arrays (a pickle) and structured dtypes are refused.
//
// Checkout writes numpy.savez's format: one stored .npz, each tensor a v1
// .npy member in C order; a Fortran-order array is read out transposed
// (Expand) when it is laid out again or converted.
package npz
