// Package layout is what every layout of another tool's models shares:
// the interface a layout implements (Layout), what its add side yields
// (Source) and what its checkout side is given (Model), and the atomic,
// content-checked writes both hf-cache and ollama make (write.go). It knows
// nothing of the store; package layouts, above it, drives the archiver and
// the restorer.
package layout
