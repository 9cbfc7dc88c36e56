// Package formats defines what every container codec produces and consumes.
//
// A codec has two halves. Parse reads a container and returns a Layout: the
// container's files cut into extents (frame bytes, tensor bytes, zero
// padding) plus the list of tensors. Plan does the reverse without any I/O:
// from tensors (name, dtype, shape, size) and options it returns a Layout
// whose frame extents carry their literal bytes. The restorer streams a
// planned layout to disk, filling tensor extents from the store, then parses
// the result again with the same codec to check it.
//
// Beyond Parse, a codec owns the rest of its format's behaviour through
// optional interfaces (checkout.go, options.go, details.go): PlanCheckout
// lays tensors out for checkout and says which options its plan used,
// Honours names the options it takes, Holds what its versions hold beside
// their tensors and Keeps what of that it writes (the one rule on options
// and losses, options.go, refuses the rest), Export says what a conversion
// out of it carries, Expand lists the tensors users see when they are not the stored
// ones, Encoding writes a stored compressed file back, Describe and Diff
// give show and diff their format's details as data, LimitFlags declare
// add's flags for its own bounds. The program finds them at one typed
// registry, internal/codecs, never through maps keyed by format names.
//
// Codecs know nothing about the store; they only read files through Dir.
//
// Every length and count a codec reads is bounded before it allocates, and
// what a parse builds from the metadata it reads (names, keys, values,
// views) is charged to a Budget proportional to that metadata (Limits.Budget),
// so that no small input can expand into gigabytes.
package formats
