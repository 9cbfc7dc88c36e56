// Package layouts is the one registry of other tools' model layouts (a
// Hugging Face cache, an Ollama models folder), as package codecs is of
// container formats: add asks each, in order, whether it takes the path it
// was given, and `checkout --layout NAME` finds its writer here. Each
// layout is a folder under layouts/ implementing layout.Layout and one
// line in layouts.go; this package drives the archiver and the restorer for them.
package layouts
