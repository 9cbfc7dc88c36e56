// Package errs holds the error classes every mstore package shares.
//
// Each user-visible failure belongs to exactly one Class. A Class is itself an
// error, so callers match with errors.Is(err, errs.SchemaError); an *Error
// carries the detail (package, path, byte offset) and unwraps to its class and
// its cause. Only cmd/mstore turns an error into text and an exit code.
package errs

import (
	"errors"
	"fmt"
	"strings"
)

// Class is the kind of a failure. Its zero value is invalid.
type Class int

const (
	_ Class = iota
	// InvalidArchive: a container's structure is broken (bad magic, truncated,
	// overlapping or out-of-file ranges).
	InvalidArchive
	// PathTraversal: a path inside the input would leave its root.
	PathTraversal
	// SchemaError: well-formed structure with invalid content.
	SchemaError
	// UnsupportedVersion: a format, version or type this build does not know.
	UnsupportedVersion
	// SizeLimitExceeded: a configured limit on sizes, counts or depth.
	SizeLimitExceeded
	// NotFound: an unknown name, tag or digest.
	NotFound
	// Conflict: a tag that exists at another digest; a destination that exists.
	Conflict
	// IntegrityError: bytes that no longer match their digest.
	IntegrityError
	// LossyConversion: a conversion that would lose information.
	LossyConversion
	// Unauthorized: a remote refused the request for want of the right
	// credentials (HTTP 401/403): a token or login is missing or wrong.
	Unauthorized
)

var keys = map[Class]string{
	InvalidArchive:     "invalid_archive",
	PathTraversal:      "path_traversal",
	SchemaError:        "schema_error",
	UnsupportedVersion: "unsupported_version",
	SizeLimitExceeded:  "size_limit_exceeded",
	NotFound:           "not_found",
	Conflict:           "conflict",
	IntegrityError:     "integrity_error",
	LossyConversion:    "lossy_conversion",
	Unauthorized:       "unauthorized",
}

// Key is the class's stable name, as DESIGN.md lists it.
func (c Class) Key() string {
	if k, ok := keys[c]; ok {
		return k
	}
	return "internal_error"
}

func (c Class) Error() string { return c.Key() }

// ExitCode is the process exit status for a failure of this class. 1 is kept
// for failures without a class (bugs, I/O errors of the machine itself).
func (c Class) ExitCode() int {
	if _, ok := keys[c]; ok {
		return 10 + int(c)
	}
	return 1
}

// Classes lists every valid class, in declaration order.
func Classes() []Class {
	var out []Class
	for c := InvalidArchive; c <= Unauthorized; c++ {
		out = append(out, c)
	}
	return out
}

// Error is a classified failure with its context.
type Error struct {
	Class  Class
	Pkg    string // the package that refused, e.g. "safetensors"
	Path   string // the file concerned, if any
	Offset int64  // byte offset in Path where parsing failed, or -1
	Msg    string
	Err    error // the cause, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Pkg != "" {
		b.WriteString(e.Pkg)
		b.WriteString(": ")
	}
	b.WriteString(e.Class.Key())
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		if e.Offset >= 0 {
			fmt.Fprintf(&b, " at byte %d", e.Offset)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap lets errors.Is match both the class and the cause.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Class, e.Err}
	}
	return []error{e.Class}
}

// New returns a classified error of package pkg with a formatted message.
func New(class Class, pkg, format string, args ...any) *Error {
	return &Error{Class: class, Pkg: pkg, Offset: -1, Msg: fmt.Sprintf(format, args...)}
}

// At returns a classified error that names the file and byte offset.
func At(class Class, pkg, path string, offset int64, format string, args ...any) *Error {
	return &Error{Class: class, Pkg: pkg, Path: path, Offset: offset, Msg: fmt.Sprintf(format, args...)}
}

// Wrap classifies cause; the message describes what was being done.
func Wrap(class Class, pkg string, cause error, format string, args ...any) *Error {
	return &Error{Class: class, Pkg: pkg, Offset: -1, Msg: fmt.Sprintf(format, args...), Err: cause}
}

// ClassOf returns the class of err, or 0 when err carries none.
func ClassOf(err error) Class {
	if err == nil {
		return 0
	}
	// The first class found wins: an *Error's own class precedes its cause's.
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	for _, c := range Classes() {
		if errors.Is(err, c) {
			return c
		}
	}
	return 0
}
